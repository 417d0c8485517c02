"""MARS: the turn returns and the per-seat normalisation by hand, the hook on a hand-built episode rollout, and the
conformance suite (two steps stacked on env's default calculator episodes)."""

import math

import pytest
import torch

from stackrl.blocks.turns import Segment
from stackrl.context import AdvantageContext, Rollout
from stackrl.errors import PluginError
from stackrl.testing.conformance import PluginConformance
from stackrl_mars import Mars, MarsConfig, seat_normalised, turn_advantages
from stackrl_mars.advantages import EPS

class TestConformance(PluginConformance):
    plugin_name = "mars"
    stacked_with = ("env",)
    refused_settings = [
        ({"gamma": 1.5}, "must lie in"),
        ({"gamma": -0.1}, "must lie in"),
        ({"scale": "group"}, "must be one of seat, batch, none"),
    ]


def flat(rows):
    return [v for row in rows for v in row]


def test_a_turns_return_is_its_reward_and_the_seats_later_ones_discounted():
    # seat 0's row, rewards 0, 0, 1: returns 0.25, 0.5, 1 at gamma 0.5; every turn 1 at gamma 1 (the authors')
    values = turn_advantages([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]], [0, 1, 1], 0.5, "none")
    # seat 0 alone in its seat with three turns: mean 7/12, so 0.25 - 7/12, 0.5 - 7/12, 1 - 7/12
    assert values[0] == pytest.approx([0.25 - 7 / 12, 0.5 - 7 / 12, 1 - 7 / 12])
    # seat 1: returns 0.25, 0.5, 1 and 0, 0, 0: mean 7/24
    assert values[1] == pytest.approx([0.25 - 7 / 24, 0.5 - 7 / 24, 1 - 7 / 24])
    assert values[2] == pytest.approx([-7 / 24] * 3)
    # gamma 1: every turn's return is the row's outcome; returns 1, 1, 1, -1, -1 have mean 0.2
    undiscounted = turn_advantages([[0.0, 0.0, 1.0], [0.0, -1.0]], [0, 0], 1.0, "none")
    assert flat(undiscounted) == pytest.approx([0.8, 0.8, 0.8, -1.2, -1.2])


def test_each_seat_is_centred_and_scaled_on_its_own_turns():
    # seat 0's turns 1, 3 and 5 (mean 3, std 2); seat 1's 2 and 4 (mean 3, std sqrt 2)
    values, seats = [[1.0, 3.0], [2.0], [5.0], [4.0]], [0, 1, 0, 1]
    got = seat_normalised(values, seats, "seat")
    s0, s1 = 2 + EPS, math.sqrt(2) + EPS
    assert got[0] == pytest.approx([-2 / s0, 0.0])
    assert got[2] == pytest.approx([2 / s0])
    assert got[1] == pytest.approx([-1 / s1]) and got[3] == pytest.approx([1 / s1])
    # "batch": the same centring, divided by the std of all five centred turns (-2, 0, 2, -1, 1: sqrt 2.5)
    pooled = math.sqrt(10 / 4) + EPS
    assert flat(seat_normalised(values, seats, "batch")) == pytest.approx([-2 / pooled, 0.0, -1 / pooled, 2 / pooled, 1 / pooled])
    assert seat_normalised(values, seats, "none") == [[-2.0, 0.0], [-1.0], [2.0], [1.0]]


def test_a_seat_is_never_compared_with_the_other_seats_turns():
    """Seat 1 always loses: pooled, its turns would all be negative; within its seat they average to 0."""
    values, seats = [[1.0], [-1.0], [1.0], [-1.0], [0.5], [-2.0]], [0, 1, 0, 1, 0, 1]
    got = seat_normalised(values, seats, "none")
    assert [row[0] for row in got] == pytest.approx([1 / 6, 1 / 3, 1 / 6, 1 / 3, -1 / 3, -2 / 3])
    for seat in (0, 1):
        assert sum(row[0] for row, s in zip(got, seats) if s == seat) == pytest.approx(0.0)


def test_a_seat_with_one_turn_in_the_batch_gets_no_advantage():
    # seat 0 played once; seat 1's turns 1 and 2 (mean 1.5, std sqrt 0.5); a row without actions has nothing
    got = seat_normalised([[3.0], [1.0, 2.0], []], [0, 1, 1], "seat")
    assert got[0] == [0.0] and got[2] == []
    assert got[1] == pytest.approx([-0.5 / (math.sqrt(0.5) + EPS), 0.5 / (math.sqrt(0.5) + EPS)])


def rollout_of(turn_rewards, seats, segments, widths, group_size=2):
    n = len(turn_rewards)
    columns = {"env_turn_rewards": turn_rewards, "env_seat": seats, "segments": segments}
    return Rollout(prompts=["p"] * n, completions=["c"] * n, prompt_ids=[[1]] * n,
                   completion_ids=[[5] * w for w in widths], columns=columns, group_size=group_size)


def context(rollout, acted):
    return AdvantageContext(step=0, tokenizer=None, policy=None, _log=lambda *_: None, _plugin="mars",
                            _acted=lambda *args: acted.append(args[1:3]), rollout=rollout,
                            total_reward=torch.zeros(len(rollout)))


def action(turn, start, end):
    return Segment("action", turn, start, end, "move: 1")


def test_the_hook_gives_each_actions_tokens_its_turns_advantage_and_observations_none():
    """Two episodes, X then O: X's rows act at tokens 0-2 and 5-7 (an observation between), O's at 0-2. X wins
    the first episode on its second move (O's only turn gets -1), O wins the second (X's last turn gets -1)."""
    rollout = rollout_of(
        turn_rewards=[[0.0, 1.0], [-1.0], [0.0, -1.0], [1.0]],
        seats=[0, 1, 0, 1],
        segments=[[action(0, 0, 2), action(1, 5, 7)], [action(0, 0, 2)], [action(0, 0, 2), action(1, 5, 7)],
                  [action(0, 0, 2)]],
        widths=[8, 3, 8, 3],
    )
    acted = []
    got = Mars(MarsConfig(gamma=0.5, scale="none")).estimate_advantages(context(rollout, acted))
    # X's returns 0.5, 1, -0.5, -1 (mean 0); O's -1 and 1 (mean 0)
    want = torch.zeros(4, 8)
    want[0, 0:2], want[0, 5:7] = 0.5, 1.0
    want[1, 0:2] = -1.0
    want[2, 0:2], want[2, 5:7] = -0.5, -1.0
    want[3, 0:2] = 1.0
    torch.testing.assert_close(got, want)
    assert acted == [(4, 4)]


def test_the_hook_leaves_a_rollout_without_episodes_to_grpo():
    rollout = Rollout(prompts=["p"] * 2, completions=["c"] * 2, prompt_ids=[[1]] * 2, completion_ids=[[5]] * 2,
                      columns={}, group_size=2)
    acted = []
    assert Mars().estimate_advantages(context(rollout, acted)) is None
    assert acted == [(0, 2)]


def test_a_run_without_the_env_plugin_is_told_mars_will_not_act():
    from stackrl.plugin import RunFacts

    facts = dict(max_steps=2, group_size=2, groups_per_step=1, columns=None, builtin_columns=(), chat=False,
                 reference=False, source="games")
    assert Mars().check_run(RunFacts(**facts, components=("env",))) is None
    assert "no env plugin" in Mars().check_run(RunFacts(**facts, components=("exact_match",)))[0]


def test_actions_and_turn_rewards_that_disagree_are_an_error():
    rollout = rollout_of([[0.0, 1.0], [1.0]], [0, 1], [[action(0, 0, 2)], [action(0, 0, 2)]], [3, 3])
    with pytest.raises(PluginError, match="row 0 has 1 actions but 2 turn rewards"):
        Mars().estimate_advantages(context(rollout, []))
