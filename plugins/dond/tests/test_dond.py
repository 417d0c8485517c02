"""DoND self-play: each seat's score under the objective, the round's filter, the kept seats' actions (and only
their actions) fine-tuned at the round's end, GRPO's own update off, and a round carried across a resume."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import StepContext
from stackrl.blocks.turns import Segment
from stackrl.context import Rollout
from stackrl.testing.conformance import PluginConformance
from stackrl_dond import Dond, DondConfig
from stackrl_dond.filtering import cutoff, kept, seat_score

EOS = 0


class TestConformance(PluginConformance):
    plugin_name = "dond"
    refused_settings = [
        ({"objective": "selfish"}, "dond.objective: must be one of self, coop, comp"),
        ({"filter": "top_half"}, "dond.filter: must be one of above_avg, nonzero, all"),
        ({"every": 0}, "dond.every: must be at least 1"),
        ({"sft_learning_rate": 0.0}, "dond.sft_learning_rate: must be positive"),
        ({"sft_epochs": 0}, "dond.sft_epochs: must be at least 1"),
    ]


# -- the filter, by hand ------------------------------------------------------------------------------------------

def test_seat_scores_under_each_objective():
    assert seat_score([6.0, 2.0], 0, "self") == 6.0 and seat_score([6.0, 2.0], 1, "self") == 2.0
    assert seat_score([6.0, 2.0], 0, "coop") == 8.0 and seat_score([6.0, 2.0], 1, "coop") == 8.0
    assert seat_score([6.0, 2.0], 0, "comp") == 4.0 and seat_score([6.0, 2.0], 1, "comp") == -4.0


def test_the_cutoff_is_the_rounds_mean_and_a_kept_seat_is_strictly_above_it():
    scores, deals = [6.0, 2.0, 0.0, 0.0, 3.0, 3.0], [True, True, False, False, True, True]
    assert cutoff(scores, "above_avg") == pytest.approx(14 / 6)
    assert kept(scores, deals, "self", "above_avg") == [True, False, False, False, True, True]
    assert kept([2.0, 2.0], [True, True], "self", "above_avg") == [False, False]  # at the mean: not above it
    assert kept(scores, deals, "self", "nonzero") == [True, True, False, False, True, True]
    assert kept(scores, deals, "self", "all") == [True] * 6


def test_competitive_rounds_keep_an_even_deal_at_score_zero_but_not_a_failed_game():
    scores, deals = [4.0, -4.0, 0.0, 0.0, 0.0, 0.0], [True, True, False, False, True, True]
    assert kept(scores, deals, "comp", "above_avg") == [True, False, False, False, True, True]
    assert kept(scores, deals, "self", "above_avg") == [True, False, False, False, False, False]


# -- the plugin on a hand-built round -----------------------------------------------------------------------------

def _rollout() -> Rollout:
    """One group of three two-seat games. Game 0: a deal worth 6 to seat 0 and 2 to seat 1; game 1: no deal;
    game 2: a deal worth 3 to each. Seat 0 of game 0 acted twice, an observation (31 32, loss mask 0) between."""
    completion_ids = [[21, 22, 31, 32, 23, EOS], [24, EOS], [25, EOS], [26, EOS], [27, EOS], [28, 29, EOS]]
    segments = [[Segment("action", 0, 0, 2, "a"), Segment("action", 1, 4, 6, "b")], [Segment("action", 0, 0, 2, "c")],
                [Segment("action", 0, 0, 2, "d")], [Segment("action", 0, 0, 2, "e")],
                [Segment("action", 0, 0, 2, "f")], [Segment("action", 0, 0, 3, "g")]]
    deal, none = [{"deal": [1, 0, 2]}], [{"deal": None}]
    return Rollout(
        prompts=["p"] * 6, completions=[""] * 6, prompt_ids=[[11, 12 + seat] for seat in (0, 1) * 3],
        completion_ids=completion_ids, group_size=6,
        columns={"env_seat": [0, 1] * 3, "env_episode": [0, 0, 1, 1, 2, 2], "env_return": [6.0, 2.0, 0.0, 0.0, 3.0, 3.0],
                 "env_info": [[{}, {}], deal, [{}], none, [{}], deal], "segments": segments},
        loss_mask=[[1, 1, 0, 0, 1, 1], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1, 1]],
    )


def _step(plugin, step, rollout=None):
    phases, logged, acted = [], {}, []
    ctx = StepContext(step=step, tokenizer=SimpleNamespace(eos_token_id=EOS), policy=None, _log=logged.__setitem__,
                      _plugin="dond", rollout=rollout or _rollout(),
                      _phase=lambda plugin, name, contexts, targets, **options: phases.append(
                          (name, contexts, targets, options)))
    ctx.acted = lambda n, of, hint=None: acted.append((n, of))
    plugin.post_step(ctx)
    return phases, logged, acted


def test_a_round_fine_tunes_on_the_kept_seats_actions_each_after_its_context():
    plugin = Dond(DondConfig(objective="self", filter="above_avg", sft_learning_rate=0.01, sft_epochs=3))
    phases, logged, acted = _step(plugin, 1)
    # self scores 6 2 0 0 3 3, mean 7/3: seat 0 of game 0 and both seats of game 2
    [(name, contexts, targets, options)] = phases
    assert name == "bc" and options == {"learning_rate": 0.01, "epochs": 3, "batch_size": None}
    assert list(zip(contexts, targets)) == [
        ([11, 12], [21, 22, EOS]),                  # its first action, eos added
        ([11, 12, 21, 22, 31, 32], [23, EOS]),      # its second, after the observation (never a target)
        ([11, 12], [27, EOS]),
        ([11, 13], [28, 29, EOS]),
    ]
    assert acted == [(3, 6)]
    assert logged["dond/kept"] == 3 and logged["dond/pairs"] == 4
    assert logged["dond/cutoff"] == pytest.approx(7 / 3)
    assert logged["dond/agreement"] == pytest.approx(2 / 3) and logged["dond/score"] == pytest.approx(14 / 6)


def test_the_cooperative_objective_keeps_both_seats_of_the_best_games():
    plugin = Dond(DondConfig(objective="coop"))
    [(_, contexts, targets, _)] = _step(plugin, 1)[0]
    assert targets == [[21, 22, EOS], [23, EOS], [24, EOS], [27, EOS], [28, 29, EOS]]  # games 0 and 2, both seats


def test_a_round_of_several_steps_filters_against_the_whole_rounds_mean():
    """every: 2: nothing is fine-tuned after the first step; at the second the cutoff is the mean of both steps."""
    plugin = Dond(DondConfig(every=2))
    phases, _, acted = _step(plugin, 1)
    assert phases == [] and acted == [(0, 0)] and len(plugin.round) == 6
    low = _rollout()
    low.columns["env_return"] = [0.0] * 6
    phases, logged, acted = _step(plugin, 2, low)
    assert logged["dond/cutoff"] == pytest.approx(14 / 12)  # (6 + 2 + 3 + 3) / 12
    assert acted == [(4, 12)]  # 6, 2, 3 and 3 of the first step; none of the second
    assert len(phases[0][2]) == 5 and plugin.round == []


def test_a_resumed_round_ends_as_the_uninterrupted_one():
    whole, first = Dond(DondConfig(every=2)), Dond(DondConfig(every=2))
    _step(whole, 1)
    _step(first, 1)
    resumed = Dond(DondConfig(every=2))
    resumed.load_state_dict(first.state_dict())
    assert _step(resumed, 2)[0] == _step(whole, 2)[0] and resumed.rounds == whole.rounds == 1


def test_a_round_with_no_kept_seat_fine_tunes_nothing():
    rollout = _rollout()
    rollout.columns["env_return"] = [0.0] * 6
    phases, logged, acted = _step(Dond(DondConfig()), 1, rollout)
    assert phases == [] and acted == [(0, 6)] and logged["dond/pairs"] == 0


def test_grpos_update_is_off_unless_asked_for():
    advantages = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    assert torch.equal(Dond(DondConfig()).reshape_advantages(advantages, None), torch.zeros(2, 2))
    assert Dond(DondConfig(grpo=True)).reshape_advantages(advantages, None) is None


def test_with_grpo_off_the_rl_step_moves_no_weight(make_config):
    """One step on the tiny model with a reward that varies within groups (no round ends: every beyond the run):
    GRPO's advantages were not all 0, and yet the weights are the initial ones exactly."""
    from stackrl.run import build_trainer

    seen = []

    def watch(hook, plugin, kwargs, result):
        if hook == "reshape_advantages" and plugin == "dond":
            seen.append((kwargs["advantages"].abs().sum().item(), result.abs().sum().item()))

    config = make_config(["digit_reward", "dond"], dond={"every": 1000}, trainer={"max_steps": 1, "learning_rate": 0.05})
    trainer = build_trainer(config, monitor=watch)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    assert len(seen) == 1 and seen[0][0] > 0 and seen[0][1] == 0
    assert all(torch.equal(a, p.detach()) for a, p in zip(before, trainer.model.parameters()))
