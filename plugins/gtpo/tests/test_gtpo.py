"""Tests of the `gtpo` plugin: turn rewards, the shaping term, the returns and their per-turn normalisation on
hand-built inputs, the estimator on a hand-built rollout, the session-interpreter environment, and the host's
conformance suite."""

from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.env import TURN_REWARDS_COLUMN
from stackrl.blocks.turns import SEGMENTS_COLUMN, Segment
from stackrl.testing.conformance import PluginConformance
from stackrl_gtpo import Gtpo, GtpoConfig
from stackrl_gtpo.interpreter import PythonAnswer, shown_value
from stackrl_gtpo.returns import code_similarity, code_tokens, returns, shaped, shaping, turn_rewards


class TestConformance(PluginConformance):
    plugin_name = "gtpo"
    # alone on the built-in task: no runner columns, GRPO's advantages kept (the runner's rollouts are below and in
    # the mechanism test)
    refused_settings = [
        ({"gamma": 1.5}, r"\[0, 1\]"),
        ({"shaping_weight": -0.1}, "non-negative"),
        ({"shaping_weight": 1.0}, "below gtpo.success"),
    ]


def test_turn_rewards_pay_each_turn_the_environments_reward_and_the_last_turn_the_rest_of_the_total():
    assert turn_rewards([[0.0, 0.0, 1.0], [0.0]], [1.0, 0.0]) == [[0.0, 0.0, 1.0], [0.0]]
    # the environment paid 0.5 at the first turn; the row's total 2 (other components): the last turn gets 1.5
    assert turn_rewards([[0.5, 0.0, 0.25]], [2.0]) == [[0.5, 0.0, 1.5]]
    assert turn_rewards([[]], [1.0]) == [[]]


def test_code_is_compared_on_names_numbers_and_operators():
    assert code_tokens("a = 1+2\nprint(a)") == ["a", "=", "1", "+", "2", "print", "(", "a", ")"]
    # LCS of [a = 1 + 2] and [a = 1 + 3] is 4 of 5 + 5 tokens: F = 8 / 10
    assert code_similarity("a = 1 + 2", "a = 1 + 3") == pytest.approx(0.8)
    assert code_similarity("", "a") == 0.0


def test_a_failed_row_gains_the_weighted_mean_similarity_to_its_groups_successes():
    codes = ["a = 1 + 2", "a = 1 + 3", "b", "a = 1 + 2", "x", "y"]
    totals = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    terms = shaping(totals, codes[:3] + ["z", "x", "y"], 3, success=1.0, weight=0.5)
    # group 1: row 1 is 0.8 like row 0, row 2 shares nothing; group 2 has no success: nothing shaped
    assert terms == pytest.approx([0.0, 0.4, 0.0, 0.0, 0.0, 0.0])
    # two successes: the mean of the two similarities
    two = shaping([1.0, 1.0, 0.0], ["a = 1 + 2", "a = 1 + 2 + 3", "a = 1 + 3"], 3, success=1.0, weight=1.0)
    assert two[2] == pytest.approx((0.8 + 2 * 5 / 12) / 2)  # "a = 1 + 3" is a subsequence of "a = 1 + 2 + 3"
    assert shaped([[0.0, 0.0], [1.0]], [0.25, 0.0]) == [[0.0, 0.25], [1.0]]


def test_returns_are_discounted_from_each_turn_on():
    assert returns([[0.0, 0.0, 1.0], [1.0]], 0.5) == [[0.25, 0.5, 1.0], [1.0]]


def _context(paid, totals, spans, texts, width, group_size):
    """An advantage context over a hand-built runner rollout: rows with their turn payments, total rewards and
    action segments (``spans``, ``texts``), completions ``width`` tokens wide; what it logs and reports is kept."""
    segments = [[Segment("action", k, start, end, text) for k, ((start, end), text) in enumerate(zip(row, words))]
                for row, words in zip(spans, texts)]
    return _bare({TURN_REWARDS_COLUMN: paid, SEGMENTS_COLUMN: segments}, len(paid), width, group_size,
                 torch.tensor(totals))


def _bare(columns, rows, width, group_size, totals=None):
    rollout = type("Rollout", (list,), {})(range(rows))
    rollout.columns, rollout.completion_mask = columns, lambda: torch.ones(rows, width)
    seen = SimpleNamespace(logged={}, acted=None)
    ctx = SimpleNamespace(rollout=rollout, group_size=group_size, total_reward=totals, log=seen.logged.__setitem__,
                          acted=lambda n, of, hint=None: setattr(seen, "acted", (n, of)))
    return ctx, seen


def test_each_action_gets_its_turns_return_normalised_against_the_same_turn_of_the_group():
    # a group of three episodes: solved at turn 1; solved at turn 2; failed twice with code like the first's
    paid = [[1.0], [0.0, 1.0], [0.0, 0.0]]
    spans = [[(0, 3)], [(0, 2), (4, 6)], [(0, 3), (5, 7)]]
    texts = [["a = 1 + 2"], ["b", "a = 1 + 2"], ["a = 1 + 3", "q"]]
    ctx, recorder = _context(paid, [1.0, 1.0, 0.0], spans, texts, width=8, group_size=3)
    got = Gtpo(GtpoConfig(gamma=0.5, shaping_weight=0.5)).estimate_advantages(ctx)
    # row 2's outcome (last turn) is 0 + 0.5 * mean(sim to "a = 1 + 2" over rows 0 and 1's code); its code is
    # both its cells joined: "a = 1 + 3\nq" (6 tokens) against "a = 1 + 2" (5, LCS 4) and "b\na = 1 + 2" (6, LCS 4)
    term = 0.5 * (2 * 4 / 11 + 2 * 4 / 12) / 2
    g = [[1.0], [0.5, 1.0], [0.5 * term, term]]  # returns, gamma 0.5
    first = torch.tensor([g[0][0], g[1][0], g[2][0]])
    first = (first - first.mean()) / (first.std() + 1e-4)
    second = torch.tensor([g[1][1], g[2][1]])
    second = (second - second.mean()) / (second.std() + 1e-4)
    want = torch.zeros(3, 8)
    want[0, 0:3] = first[0]
    want[1, 0:2], want[1, 4:6] = first[1], second[0]
    want[2, 0:3], want[2, 5:7] = first[2], second[1]
    assert torch.allclose(got, want, atol=1e-6)
    assert recorder.acted == (2, 3)  # row 1 played two turns, row 2 two turns and was shaped; row 0 neither
    assert recorder.logged["shaping"] == pytest.approx(term)


def test_a_turn_alone_in_its_slot_gets_zero_and_a_rollout_without_the_runner_keeps_grpo():
    ctx, _ = _context([[0.0, 1.0], [1.0]], [1.0, 1.0], [[(0, 1), (2, 3)], [(0, 1)]], [["x", "y"], ["y"]], 4, 2)
    got = Gtpo(GtpoConfig()).estimate_advantages(ctx)
    assert got[0, 2].item() == 0.0  # the second turn: only row 0 reached it
    bare, seen = _bare({}, 3, 5, 3)
    assert Gtpo(GtpoConfig()).estimate_advantages(bare) is None
    assert seen.acted == (0, 3)


def test_the_interpreter_keeps_state_across_turns_and_ends_on_the_answer():
    env = PythonAnswer()
    assert env.reset(answer="12", question="3 * 4") == ""
    observation, reward, done, info = env.step("a = 3 * 4\nb = a + 1\nb")
    assert (observation, reward, done, info["shown"]) == ("Out: 13", 0.0, False, "13")
    observation, reward, done, _ = env.step("print(c)")
    assert (observation, reward, done) == ("Error: NameError", 0.0, False)
    assert env.step("print(a)") == (None, 1.0, True, {"cell": 3, "error": None, "stopped": "exited", "shown": "12"})
    assert shown_value("1\n2\n\n") == "2"
