"""Tests of the `advalign` plugin: the credit formula and the row maps on hand-built inputs, the estimator on a
hand-built rollout, and the host's conformance suite on a two-seat game."""

from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.env import EPISODE_COLUMN, SEAT_COLUMN, TURN_REWARDS_COLUMN
from stackrl.blocks.turns import SEGMENTS_COLUMN, Segment
from stackrl.testing.conformance import PluginConformance
from stackrl_advalign import Advalign, AdvalignConfig
from stackrl_advalign.alignment import aligned, opponents, seat_advantages

# Tic-tac-toe with the live policy in both seats, read from the first digit the tiny (random) model writes.
TWO_SEATS = {
    "data": {"source": "games", "options": {"game": "tictactoe"}},
    "rewards": {"exact_match": None, "env": 1.0},
    "env": {"environment": "tictactoe", "actions": r"([1-9])", "on_unparsed": "feedback", "max_turns": 9,
            "turn_tokens": 3, "max_tokens": 60, "unparsed_feedback": "?"},
    "trainer": {"max_completion_length": 60},
}


class TestConformance(PluginConformance):
    plugin_name = "advalign"
    # alone on the built-in task: no runner columns, GRPO's advantages kept (the two-seat run is below)
    refused_settings = [
        ({"beta": -0.1}, "non-negative"),
        ({"gamma": 1.5}, r"\[0, 1\]"),
        ({"discount": -0.5}, r"\[0, 1\]"),
        ({"reward_scale": 0.0}, "positive"),
    ]


def test_the_credit_is_own_advantage_plus_beta_times_discounted_past_times_the_opponents():
    own, other, beta, gamma = [3.0, 9.0, 4.0], [14.0, 12.0, 2.0], 0.7, 0.9
    # k <= t (the authors' LLM code): w(t) = sum_{k<=t} gamma^(t-k) own(k)
    want = [3 + 0.7 * 3 * 14, 9 + 0.7 * (0.9 * 3 + 9) * 12, 4 + 0.7 * (0.81 * 3 + 0.9 * 9 + 4) * 2]
    assert aligned(own, other, beta=beta, gamma=gamma) == pytest.approx(want)
    # k < t with one more gamma (the paper's equation): no shaping at the first turn
    want = [3, 9 + 0.7 * 0.9 * (0.9 * 3) * 12, 4 + 0.7 * 0.9 * (0.81 * 3 + 0.9 * 9) * 2]
    assert aligned(own, other, beta=beta, gamma=gamma, include_current=False) == pytest.approx(want)


def test_no_opponent_or_a_turn_it_did_not_reach_leaves_the_own_advantage():
    assert aligned([1.0, -2.0], None, beta=1.0, gamma=0.9) == [1.0, -2.0]
    assert aligned([1.0, -2.0], [2.0], beta=1.0, gamma=1.0) == [1.0 + 1.0 * 2.0, -2.0]
    assert aligned([1.0, -2.0], [2.0, 5.0], beta=0.0, gamma=0.9) == [1.0, -2.0]


def test_each_row_is_paired_with_the_other_seat_of_its_episode():
    # two episodes of two seats, then an episode whose other seat is scripted (one row)
    assert opponents([0, 1, 0, 1, 0], [0, 0, 1, 1, 2]) == [1, 0, 3, 2, None]
    assert opponents([1, 0], [7, 7]) == [1, 0]


def test_turn_advantages_are_leave_one_out_returns_of_the_same_seat():
    # a group of two episodes, rows seat 0, seat 1, seat 0, seat 1; two turns each; discount 1
    rewards = [[1.0, 3.0], [5.0, 3.0], [0.0, 1.0], [3.0, 1.0]]
    # returns: [4, 3], [8, 3], [1, 1], [4, 1]; seat 0 rows 0 and 2, seat 1 rows 1 and 3
    got = seat_advantages(rewards, [0, 1, 0, 1], 4, discount=1.0)
    assert got == [[3.0, 2.0], [4.0, 2.0], [-3.0, -2.0], [-4.0, -2.0]]
    # every row of the group as the baseline: row 0's first turn 4 - mean(8, 1, 4)
    pooled = seat_advantages(rewards, [0, 1, 0, 1], 4, discount=1.0, per_seat=False)
    assert pooled[0] == pytest.approx([4 - 13 / 3, 3 - 5 / 3])
    # discount: returns r0 + 0.5 r1
    assert seat_advantages([[1.0, 2.0], [0.0, 0.0]], [0, 0], 2, discount=0.5) == [[2.0, 2.0], [-2.0, -2.0]]


class Recorder:
    def __init__(self):
        self.logged, self.acted = {}, None

    def log(self, name, value):
        self.logged[name] = value

    def acted_on(self, n, *, of, hint=None):
        self.acted = (n, of)


class FakeRollout:
    """The parts of a rollout the estimator reads: the runner's columns and the completions' width."""

    def __init__(self, columns, rows, width):
        self.columns, self.rows, self.width = columns, rows, width

    def __len__(self):
        return self.rows

    def completion_mask(self):
        return torch.ones(self.rows, self.width)


def _context(rewards, seats, episodes, spans, width, group_size):
    segments = [[Segment("action", k, start, end, "") for k, (start, end) in enumerate(row)] for row in spans]
    columns = {TURN_REWARDS_COLUMN: rewards, SEAT_COLUMN: seats, EPISODE_COLUMN: episodes, SEGMENTS_COLUMN: segments}
    recorder = Recorder()
    ctx = SimpleNamespace(rollout=FakeRollout(columns, len(rewards), width), group_size=group_size,
                          log=recorder.log, acted=recorder.acted_on)
    return ctx, recorder


def test_the_estimator_puts_each_actions_credit_on_its_tokens_and_zero_between():
    rewards = [[1.0, 3.0], [5.0, 3.0], [0.0, 1.0], [3.0, 1.0]]
    spans = [[(0, 2), (4, 6)], [(0, 1), (3, 5)], [(0, 2), (4, 5)], [(0, 2), (4, 6)]]
    ctx, recorder = _context(rewards, [0, 1, 0, 1], [0, 0, 1, 1], spans, width=7, group_size=4)
    plugin = Advalign(AdvalignConfig(beta=0.5, gamma=0.9))
    got = plugin.estimate_advantages(ctx)
    own = [[3.0, 2.0], [4.0, 2.0], [-3.0, -2.0], [-4.0, -2.0]]
    partner = [1, 0, 3, 2]
    want = torch.zeros(4, 7)
    for row, row_spans in enumerate(spans):
        a, b = own[row], own[partner[row]]
        credit = [a[0] + 0.5 * a[0] * b[0], a[1] + 0.5 * (0.9 * a[0] + a[1]) * b[1]]
        for value, (start, end) in zip(credit, row_spans):
            want[row, start:end] = value
    assert torch.allclose(got, want)
    assert recorder.acted == (4, 4)
    # the reward scale divides every reward first: advantages scale by 1/s, the shaping term by 1/s^2
    ctx, _ = _context(rewards, [0, 1, 0, 1], [0, 0, 1, 1], spans, width=7, group_size=4)
    scaled = Advalign(AdvalignConfig(beta=0.5, gamma=0.9, reward_scale=2.0)).estimate_advantages(ctx)
    assert scaled[0, 0] == pytest.approx(1.5 + 0.5 * 1.5 * 2.0)


def test_a_rollout_without_the_runners_columns_keeps_grpos_advantages():
    recorder = Recorder()
    ctx = SimpleNamespace(rollout=FakeRollout({}, 3, 5), group_size=3, log=recorder.log, acted=recorder.acted_on)
    assert Advalign(AdvalignConfig()).estimate_advantages(ctx) is None
    assert recorder.acted == (0, 3)


def test_every_row_of_a_two_seat_game_is_shaped_by_its_opponent(make_config):
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.fixtures import train_steps

    config = make_config(["env", "advalign"], **{**TWO_SEATS, "trainer": {**TWO_SEATS["trainer"], "max_steps": 1}})
    with one_thread():
        trainer = train_steps(config)
    logged = [row for row in trainer.state.log_history if "activity/advalign" in row]
    assert logged and logged[0]["activity/advalign"] == 1.0
    assert "advalign/shaping_abs" in logged[0]
