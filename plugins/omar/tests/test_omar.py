"""Tests of the `omar` plugin: the conformance suite, the turn-then-token credit on hand-built rows, and the
built-in public-goods game it is shown on."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import Rollout
from stackrl.blocks.env.party import PublicGoods
from stackrl.blocks.env.protocol import builtin_environments
from stackrl.blocks.turns import Segment
from stackrl.errors import PluginError
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_omar.credit import turn_advantages


class TestConformance(PluginConformance):
    plugin_name = "omar"
    stacked_with = ("env",)  # its rows: the env plugin's default episodes (the calculator, one seat)
    refused_settings = [
        ({"gamma": 1.5}, r"must lie in \[0, 1\]"),
        ({"baseline": "episode"}, "must be one of seat, all"),
        ({"tokens": "last"}, "must be one of split, each"),
    ]


# -- the credit on hand-built rows -------------------------------------------------------------------------------
# One group of 9 rows: 3 episodes x 3 seats (episode by episode, seats in order). Every row has two turns: tokens
# 0:2 (turn 0), an observation 2:4, tokens 4:7 (turn 1), width 8.
SEATS = [0, 1, 2] * 3
SEGMENTS = [[Segment("action", 0, 0, 2, "move: C"), Segment("action", 1, 4, 7, "move: D")] for _ in SEATS]
# Seat 0's turn rewards per episode: returns (gamma 1) [3, 2], [1, 1], [2, 0]; seat 1 always [5, 5]; seat 2
# always [0, 0].
REWARDS = [[1, 2], [5, 5], [0, 0], [0, 1], [5, 5], [0, 0], [2, 0], [5, 5], [0, 0]]
EPS = 1e-4


def credit(rewards=REWARDS, **settings):
    options = {"gamma": 1.0, "baseline": "seat", "tokens": "split"} | settings
    return turn_advantages(rewards, SEATS, SEGMENTS, 9, 8, **options)


def test_each_turn_is_compared_with_the_same_seat_at_the_same_turn_then_shared_over_its_tokens():
    a = credit()
    # seat 0, turn 0: returns 3, 1, 2 (mean 2, std 1); turn 1: 2, 1, 0 (mean 1, std 1)
    for row, (turn0, turn1) in zip((0, 3, 6), ((1, 1), (-1, 0), (0, -1))):
        want = torch.tensor([turn0 / 2] * 2 + [0.0] * 2 + [turn1 / 3] * 3 + [0.0]) / (1 + EPS)
        assert torch.allclose(a[row], want), (row, a[row])
    # seats 1 and 2 got the same in every episode: no advantage, whatever seat 0 got
    assert a[[1, 2, 4, 5, 7, 8]].abs().max() == 0
    # the observation and the padding carry nothing
    assert a[:, 2:4].abs().max() == 0 and a[:, 7].abs().max() == 0


def test_each_gives_every_token_of_a_turn_the_whole_turn_advantage():
    a = credit(tokens="each")
    assert torch.allclose(a[0], torch.tensor([1, 1, 0, 0, 1, 1, 1, 0.0]) / (1 + EPS))
    assert torch.allclose(a[3], torch.tensor([-1, -1, 0, 0, 0, 0, 0, 0.0]) / (1 + EPS))


def test_gamma_discounts_a_seats_later_rewards_in_a_turns_return():
    # gamma 0.5: seat 0's turn-0 returns 1 + 1, 0 + 0.5, 2 + 0 = 2, 0.5, 2 (mean 1.5, std sqrt(0.75))
    a = credit(gamma=0.5)
    std = 0.75**0.5
    assert torch.allclose(a[0, 0], torch.tensor(0.5 / (std + EPS) / 2))
    assert torch.allclose(a[3, 0], torch.tensor(-1.0 / (std + EPS) / 2))


def test_baseline_all_compares_a_turn_with_every_seats_same_turn():
    # turn 0 over all nine rows: returns 3, 10, 0, 1, 10, 0, 2, 10, 0: seat 1 is far above the mean now
    a = credit(baseline="all")
    returns = torch.tensor([3.0, 10, 0, 1, 10, 0, 2, 10, 0])
    want = (returns - returns.mean()) / (returns.std() + EPS) / 2
    assert torch.allclose(a[:, 0], want)


def test_a_turn_only_one_row_reached_gets_nothing():
    rewards = [r[:1] for r in REWARDS]
    segments = [row[:1] for row in SEGMENTS]
    segments[0] = SEGMENTS[0]  # seat 0 of episode 0 alone reached a second turn
    rewards[0] = [1, 2]
    a = turn_advantages(rewards, SEATS, segments, 9, 8, gamma=1.0, baseline="seat", tokens="split")
    assert a[0, 4:7].abs().max() == 0
    assert a[0, 0] > 0  # its first turn still compared: returns 3, 0, 2


def test_rewards_and_turns_that_do_not_match_are_an_error():
    with pytest.raises(PluginError, match="segments but"):
        credit(rewards=[[1]] + REWARDS[1:])


def rollout(columns):
    return Rollout(prompts=["p"] * 9, completions=["c"] * 9, prompt_ids=[[0]] * 9, completion_ids=[[1] * 8] * 9,
                   columns=columns, group_size=9)


class Context(SimpleNamespace):
    def acted(self, n, of, hint=None):
        self.activity = (n, of)

    def log(self, key, value):
        self.logged[key] = value


def test_the_plugin_gives_the_losss_advantages_from_the_env_columns():
    ctx = Context(rollout=rollout({"env_turn_rewards": REWARDS, "env_seat": SEATS, "segments": SEGMENTS}),
                  group_size=9, logged={})
    advantages = make_plugin("omar").estimate_advantages(ctx)
    assert torch.equal(advantages, credit())
    assert ctx.activity == (3, 9) and ctx.logged["turns"] == 2  # seat 0's rows; seats 1 and 2 never vary


def test_an_outcome_reward_is_added_to_each_rows_last_turn():
    plugin = make_plugin("omar", outcome_reward="judge")
    assert plugin.needs_rewards() == {"outcome_reward": "judge"}
    scored = rollout({"env_turn_rewards": [[0, 0]] * 8 + [[]], "env_seat": SEATS, "segments": SEGMENTS})
    scored.rewards["judge"] = torch.tensor([3.0, float("nan"), 1, 1, 2, 0, 0, 0, 5])
    # the row without a turn keeps none; the unscored row keeps its own
    assert plugin.seat_rewards(scored) == [[0, 3], [0, 0], [0, 1], [0, 1], [0, 2], [0, 0], [0, 0], [0, 0], []]
    assert make_plugin("omar").needs_rewards() == {}


def test_rows_without_episodes_are_left_to_grpo():
    ctx = Context(rollout=rollout({}), group_size=9, logged={})
    assert make_plugin("omar").estimate_advantages(ctx) is None
    assert ctx.activity == (0, 9)


# -- the public-goods game ---------------------------------------------------------------------------------------


def test_public_goods_is_a_built_in_environment():
    assert builtin_environments()["public_goods"] == "stackrl.blocks.env.party:PublicGoods"


def test_a_round_pays_what_each_seat_kept_and_its_share_of_the_multiplied_pot():
    game = PublicGoods(players=3, rounds=2, multiplier=3.0)
    assert game.reset(seed=1) == "round 1 of 2\nyou-them: -\nactions: C D"
    assert game.step("C") == ("round 1 of 2\nyou-them: -\nactions: C D", [0.0] * 3, False, {})
    assert game.turn == 1
    assert game.step(" d ")[1:3] == ([0.0] * 3, False)
    observation, rewards, done, info = game.step("C")
    # pot 2 x 3 / 3 = 2 each; seat 1 kept its endowment
    assert rewards == [2.0, 3.0, 2.0] and not done and info == {"round": "CDC"} and game.turn == 0
    # seat 0 sees its C, and D: not every other seat contributed
    assert observation == "round 2 of 2\nyou-them: CD\nactions: C D"
    game.step("C")
    assert game.render() == "round 2 of 2\nyou-them: DC\nactions: C D"  # seat 1: its D; the others both gave
    game.step("C")
    observation, rewards, done, _ = game.step("D")
    assert observation is None and done and rewards == [2.0, 2.0, 3.0]


def test_an_illegal_move_ends_the_game_lost_by_its_seat_alone():
    game = PublicGoods()
    game.reset()
    game.step("C")
    assert game.step("move") == (None, [0.0, -1.0, 0.0], True, {"illegal": "move"})


def test_the_game_needs_three_players_and_a_round():
    with pytest.raises(ValueError, match="at least 3"):
        PublicGoods(players=2)
    with pytest.raises(ValueError, match="rounds"):
        PublicGoods(rounds=0)
    assert PublicGoods(players=4).seats == 4 and PublicGoods().legal_actions() == ["C", "D"]
