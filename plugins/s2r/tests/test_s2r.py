"""S^2R: answer, self-verify, answer again after "wrong"; each turn credited by its own reward less its history's
running mean (process level), or the final answer's leave-one-out reward on every token (outcome level)."""

from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.roles import broadcast_segments
from stackrl.context import Rollout
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import Scripted, make_plugin
from stackrl_s2r import HistoryBaseline, histories, leave_one_out, turn_advantages, turn_rewards

A, V = "answer", "verify"


class TestConformance(PluginConformance):
    plugin_name = "s2r"
    refused_settings = [({"level": "token"}, "must be one of process, outcome"),
                        ({"answers": 0}, "must be at least 1"), ({"verify_bonus": 0.0}, "must be more than 0"),
                        ({"change_bonus": -1.0}, "must be more than 0"), ({"min_count": 0}, "must be at least 1"),
                        ({"metric": "s2r"}, "must be a built-in outcome reward"),
                        ({"revise_instruction": " "}, "must hold the instruction")]


@pytest.mark.parametrize(
    "kinds, outcomes, rewards, keys",
    [
        ([A, V], [True, True], [1, 1], ["", "R1"]),  # a right answer judged correct
        ([A, V], [True, False], [1, -1], ["", "R1"]),  # ... judged wrong: the verdict is wrong
        ([A, V], [False, None], [-1, -1], ["", "R-1"]),  # no verdict is not a right one
        # a wrong answer judged wrong, corrected, the correction judged correct
        ([A, V, A, V], [False, False, True, True], [-1, 1, 1, 1], ["", "R-1", "R-1V1", "R-1V1R1"]),
        # the second check is judged against the answer it checks, the corrected one
        ([A, V, A, V], [False, False, True, False], [-1, 1, 1, -1], ["", "R-1", "R-1V1", "R-1V1R1"]),
        ([A], [False], [-1], [""]),
    ],
)
def test_turn_rewards_and_their_histories(kinds, outcomes, rewards, keys):
    assert turn_rewards(kinds, outcomes) == rewards
    assert histories(kinds, rewards) == keys


def test_the_baseline_is_a_historys_running_mean_once_it_has_min_count_rewards():
    baseline = HistoryBaseline(min_count=3)
    baseline.add(["", "", "R1"], [1, -1, 1])
    assert baseline("") == 0.0 and baseline("R1") == 0.0 and baseline("R-1") == 0.0  # too few yet
    baseline.add(["", "R1", "R1"], [1, 1, -1])
    assert baseline("") == pytest.approx(1 / 3) and baseline("R1") == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "kinds, rewards, expected",
    [
        # first answer right (b 0.5), its check right (b 0.2), doubled as the check of a right answer
        ([A, V], [1, 1], [1 - 0.5, 2 * (1 - 0.2)]),
        ([A, V], [1, -1], [0.5, 2 * (-1 - 0.2)]),  # a wrong check of a right answer: doubled down
        # a wrong answer (b 0.5), a right "wrong" (b -0.4, not doubled), a fix (b 0, changed: doubled), its check
        ([A, V, A, V], [-1, 1, 1, 1], [-1.5, 1 + 0.4, 2 * 1.0, 2 * 1.0]),
        ([A, V, A, V], [-1, 1, -1, 1], [-1.5, 1.4, -1.0, 1.0]),  # stays wrong: no bonus, its right check not doubled
    ],
)
def test_a_turns_advantage_is_its_reward_less_its_historys_baseline_times_the_bonuses(kinds, rewards, expected):
    baseline = {"": 0.5, "R1": 0.2, "R-1": -0.4}.get
    values = turn_advantages(kinds, rewards, lambda key: baseline(key, 0.0), verify_bonus=2.0, change_bonus=2.0)
    assert values == pytest.approx(expected)
    plain = turn_advantages(kinds, rewards, lambda key: 0.0, verify_bonus=1.0, change_bonus=1.0)
    assert plain == [float(r) for r in rewards]  # no baseline, no bonus: the turn's own reward


def test_the_outcome_level_is_leave_one_out():
    assert leave_one_out([1, -1, -1, -1], 4).tolist() == pytest.approx([2.0, -2 / 3, -2 / 3, -2 / 3])
    assert leave_one_out([1, 1, -1, -1], 2).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_the_baseline_survives_a_checkpoint(tmp_path):
    plugin = make_plugin("s2r", min_count=1)
    plugin.baseline.add(["", "R1", "R-1V1"], [1, -1, 1])
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("s2r", min_count=1)
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert [resumed.baseline(k) for k in ("", "R1", "R-1V1", "R-1")] == [1.0, -1.0, 1.0, 0.0]


RIGHT, WRONG_ANSWER = "The answer is 4.", "The answer is 5."
SAYS_RIGHT, SAYS_WRONG = "Verdict: correct", "Verdict: wrong"
# One group of four trajectories, scripted: (replies, kinds, the turns' +1/-1 rewards)
GROUP = {
    "P0|": [RIGHT, SAYS_RIGHT],  # right, judged correct: stops
    "P1|": [WRONG_ANSWER, SAYS_WRONG, RIGHT, SAYS_RIGHT],  # judged wrong, fixed, the fix judged correct
    "P2|": [WRONG_ANSWER, SAYS_WRONG, WRONG_ANSWER, SAYS_RIGHT],  # a right "wrong", a failed fix, a wrong "correct"
    "P3|": [RIGHT, SAYS_WRONG, RIGHT, SAYS_WRONG],  # a wrong "wrong" that kept the answer, the last verdict ends it
}
REWARDS = [[1, 1], [-1, 1, 1, 1], [-1, 1, -1, -1], [1, -1, 1, -1]]


def scripted_rollout(plugin, replies: dict) -> Rollout:
    """The plugin's rollout of ``replies`` (one group), as the host builds it from the samples."""
    ctx = Scripted({p: list(r) for p, r in replies.items()})
    ctx.training = True
    samples = plugin.generate_rollout(list(replies), ctx)
    return Rollout(prompts=list(replies), completions=[""] * len(replies), prompt_ids=samples.prompt_ids,
                   completion_ids=samples.completion_ids, group_size=len(replies),
                   columns={**samples.columns, "answer": ["4"] * len(replies)}, loss_mask=samples.loss_mask)


def hook_context(rollout):
    logged, acted = {}, []
    return SimpleNamespace(rollout=rollout, log=logged.__setitem__, acted=lambda n, of, hint=None: acted.append((n, of)),
                           group_size=rollout.group_size), logged, acted


def test_each_turn_carries_its_own_advantage_against_the_batches_before_it():
    plugin = make_plugin("s2r", answers=2, verify_instruction="?", revise_instruction="!", min_count=2)
    rollout = scripted_rollout(plugin, GROUP)
    kinds = [[s.kind for s in row] for row in rollout.columns["segments"]]
    assert kinds == [[A, V], [A, V, A, V], [A, V, A, V], [A, V, A, V]]  # every answer verified, two at most
    ctx, logged, acted = hook_context(rollout)
    assert plugin.reward(ctx) == [1.0, 1.0, 0.0, 1.0]  # the component: the final answer's correctness
    assert acted == [(3, 4)] and logged["verify_right"] == pytest.approx(4 / 7)
    spans = [[(s.start, s.end) for s in row] for row in rollout.columns["segments"]]
    width = rollout.completion_mask().size(1)
    # The first batch has no baseline yet: each turn's own reward, doubled on a check of a right answer and on an
    # answer that changed the correctness of the one before it.
    first = [[1, 2], [-1, 1, 2, 2], [-1, 1, -1, -1], [1, -2, 1, -2]]
    assert torch.equal(plugin.estimate_advantages(ctx), broadcast_segments(first, spans, width))
    # The second batch, the same again: the histories the first saw twice or more have their means as baselines
    # ("" 0, "R1" 0, "R-1" 1, "R-1V1" 0), those it saw once keep 0 ("R1V-1", "R-1V1R1", ...).
    second = [[1, 2], [-1, 0, 2, 2], [-1, 0, -1, -1], [1, -2, 1, -2]]
    assert torch.equal(plugin.estimate_advantages(ctx), broadcast_segments(second, spans, width))
    assert plugin.baseline("R-1") == 1.0 and plugin.baseline("R1V-1") == 1.0  # both batches now
    # Injected text (the verify and revise marks) carries no advantage: only the turns' spans do.
    covered = torch.zeros(len(rollout), width, dtype=torch.bool)
    for row, row_spans in enumerate(spans):
        for start, end in row_spans:
            covered[row, start:end] = True
    loss_mask = torch.tensor([m + [0] * (width - len(m)) for m in rollout.loss_mask], dtype=torch.bool)
    assert torch.equal(covered, loss_mask)


def test_the_outcome_level_gives_every_token_the_final_answers_leave_one_out_reward():
    plugin = make_plugin("s2r", answers=2, verify_instruction="?", revise_instruction="!", level="outcome")
    ctx, _, _ = hook_context(scripted_rollout(plugin, GROUP))
    assert plugin.estimate_advantages(ctx).tolist() == pytest.approx([2 / 3, 2 / 3, -2.0, 2 / 3])
    assert plugin.baseline.counts == {}  # the outcome level keeps no history
