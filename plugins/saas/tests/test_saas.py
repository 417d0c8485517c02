"""SAAS's boundary and penalties on hand-built groups, the reward hook on a stub rollout, and the conformance suite."""

from types import SimpleNamespace

import pytest

from stackrl.plugin import RunFacts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_saas.boundary import (
    NEED_SEARCH, NO_SEARCH, UNDETERMINED, boundary_label, group_penalties, repeats_a_call, sufficient_calls,
)
from stackrl_saas.plugin import row_calls


class TestConformance(PluginConformance):
    plugin_name = "saas"
    stacked_with = ("env",)  # its rows: the env plugin's default episodes (the calculator on the built-in task)
    # short tool-free answers: the two steps show it runs in the stack; the rule is tested below
    plugin_settings = {"saas": {"stage_two_step": 0, "tool_free_samples": 1, "min_correct": 1, "max_new_tokens": 8}}
    refused_settings = [
        ({"tool_free_samples": 0}, "must be at least 1, not 0"),
        ({"min_correct": 5}, r"must lie in \[1, tool_free_samples=4\], not 5"),
        ({"min_correct": 0}, r"must lie in \[1, tool_free_samples=4\], not 0"),
        ({"beta": -0.1}, "must be a finite number of 0 or more, not -0.1"),
        ({"repeat_penalty": float("nan")}, "must be a finite number of 0 or more"),
        ({"stage_two_step": -1}, "must be 0 or more, not -1"),
        ({"max_new_tokens": 0}, "must be at least 1, not 0"),
        ({"temperature": 0.0}, "must be a positive number, not 0.0"),
        ({"metric": "bleu"}, "must be a built-in outcome reward"),
    ]


# -- the rule --------------------------------------------------------------------------------------------------------

def test_the_label_contrasts_tool_free_answers_with_the_episodes():
    assert boundary_label(2, [False, False], min_correct=2) == NO_SEARCH  # known without the tool, even if the
    assert boundary_label(3, [True, False], min_correct=2) == NO_SEARCH   # episodes failed
    assert boundary_label(1, [False, True], min_correct=2) == NEED_SEARCH
    assert boundary_label(1, [False, False], min_correct=2) == UNDETERMINED
    assert boundary_label(0, [False, False], min_correct=1) == UNDETERMINED


def test_the_sufficient_count_is_zero_inside_and_the_fewest_right_episodes_outside():
    assert sufficient_calls(NO_SEARCH, [3, 1, 2], [True, True, False]) == 0
    assert sufficient_calls(NEED_SEARCH, [3, 1, 0], [True, True, False]) == 1  # the wrong row's 0 does not count
    assert sufficient_calls(UNDETERMINED, [3, 1], [False, False]) is None


def test_penalties_by_hand():
    right, wrong = True, False
    # Inside the boundary: every call of a right episode costs beta; a wrong one is not penalised.
    assert group_penalties(NO_SEARCH, [0, 2, 3], [right, right, wrong], [False] * 3, beta=0.05,
                           repeat_penalty=0.1) == [0.0, pytest.approx(-0.10), 0.0]
    # Outside: only the calls beyond the fewest of a right episode (here 1).
    assert group_penalties(NEED_SEARCH, [1, 3, 0], [right, right, wrong], [False] * 3, beta=0.05,
                           repeat_penalty=0.1) == [0.0, pytest.approx(-0.10), 0.0]
    # Undetermined: nothing but repetitions, which every episode pays once, right or wrong.
    assert group_penalties(UNDETERMINED, [4, 2], [wrong, wrong], [True, False], beta=0.05,
                           repeat_penalty=0.1) == [pytest.approx(-0.1), 0.0]
    assert group_penalties(NO_SEARCH, [2], [right], [True], beta=0.05, repeat_penalty=0.1) == [pytest.approx(-0.2)]


def test_a_repeated_call_is_the_same_tool_with_the_same_arguments():
    moves = [[0, ["calc", ["3 * 4"], {}]], [0, ["calc", ["12 + 1"], {}]], [0, ["calc", [" 3 * 4 "], {}]]]
    calls = row_calls(moves, seat=0)
    assert len(calls) == 3 and repeats_a_call(calls)
    assert not repeats_a_call(row_calls(moves[:2], seat=0))
    assert row_calls([[1, ["calc", ["1+1"], {}]], [0, "move: 3"]], seat=0) == []  # another seat's call, a move
    # <tool_call> JSON arguments (keyword arguments, possibly nested) compare by value
    json_calls = [[0, ["search", [], {"query": "kavo", "opts": {"k": 3}}]], [0, ["search", [], {"opts": {"k": 3},
                                                                                              "query": "kavo"}]]]
    assert repeats_a_call(row_calls(json_calls, seat=0))


# -- the hook --------------------------------------------------------------------------------------------------------

RIGHT, WRONG = "7 * 2 = 14\nThe answer is 14.", "The answer is 15."


def call(expr):
    return [0, ["calc", [expr], {}]]


class RolloutStub(SimpleNamespace):
    def __len__(self):
        return len(self.completions)


class RewardStub:
    """The reward stage's context: a rollout of groups of ``size`` rows; ``generate`` answers with ``free``."""

    def __init__(self, completions, moves, free, *, size=2, step=5, answers=None):
        n = len(completions)
        answers = answers or ["14"] * n
        self.rollout = RolloutStub(
            completions=completions, prompts=[f"q{i // size}" for i in range(n)], group_size=size,
            columns={"answer": answers, "env_moves": moves, "env_seat": [0] * n})
        self.free, self.step, self.training = free, step, True
        self.asked, self.logged, self.acted_on = [], {}, None

    def generate(self, prompts, **sampling):
        self.asked.append((list(prompts), sampling))
        return [SimpleNamespace(text=t) for t in self.free]

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def test_the_hook_labels_each_question_from_its_own_tool_free_answers():
    plugin = make_plugin("saas", tool_free_samples=2, min_correct=2, stage_two_step=5)
    completions = [RIGHT, RIGHT, RIGHT, WRONG, WRONG, WRONG]
    moves = [[call("7*2")], [], [call("7*2"), call("1+1")], [], [call("7*2")], [call("3+4"), call("3+4")]]
    # question 0: both tool-free answers right (inside); question 1: one (outside, fewest right calls 2);
    # question 2: none, no right episode (undetermined), its second row repeats a call.
    ctx = RewardStub(completions, moves, [RIGHT, RIGHT, RIGHT, WRONG, WRONG, WRONG])
    out = plugin.reward(ctx)
    assert out == [pytest.approx(-0.05), 0.0, 0.0, 0.0, 0.0, pytest.approx(-0.1)]
    assert ctx.asked == [(["q0", "q0", "q1", "q1", "q2", "q2"], {})]
    assert ctx.acted_on == (4, 6)
    assert ctx.logged["boundary/no_search"] == pytest.approx(1 / 3)
    assert ctx.logged["tool_free_accuracy"] == pytest.approx(0.5)
    assert ctx.logged["unnecessary_calls"] == pytest.approx(1 / 6)


def test_stage_one_is_the_outcome_reward_alone_and_samples_nothing():
    plugin = make_plugin("saas", stage_two_step=5)
    ctx = RewardStub([RIGHT, RIGHT], [[call("7*2")], [call("1"), call("1")]], [], step=4)
    assert plugin.reward(ctx) == [0.0, 0.0]
    assert ctx.asked == [] and ctx.acted_on == (0, 2)


def test_evaluation_is_scored_by_the_outcome_reward_alone():
    plugin = make_plugin("saas", stage_two_step=0)
    ctx = RewardStub([RIGHT, RIGHT], [[call("7*2")], [call("1"), call("1")]], [RIGHT] * 4, step=3)
    ctx.training = False
    assert plugin.reward(ctx) == [0.0, 0.0] and ctx.asked == []


def test_sampling_settings_reach_the_tool_free_answers():
    plugin = make_plugin("saas", tool_free_samples=1, min_correct=1, stage_two_step=0, max_new_tokens=16,
                         temperature=0.5)
    ctx = RewardStub([RIGHT, WRONG], [[call("7*2")], []], [WRONG], step=0)
    assert plugin.reward(ctx) == [0.0, 0.0]  # outside: the right episode made the fewest calls
    assert ctx.asked == [(["q0"], {"max_new_tokens": 16, "temperature": 0.5})]


def test_a_question_without_an_answer_is_undetermined_and_without_env_nothing_is_scored():
    plugin = make_plugin("saas", tool_free_samples=1, min_correct=1, stage_two_step=0)
    ctx = RewardStub([RIGHT, RIGHT], [[call("7*2")], []], [RIGHT], step=0, answers=[None, None])
    assert plugin.reward(ctx) == [0.0, 0.0] and ctx.acted_on == (0, 2)
    bare = RewardStub([RIGHT, RIGHT], [[], []], [RIGHT], step=0)
    del bare.rollout.columns["env_moves"]
    assert plugin.reward(bare) == [None, None] and bare.asked == []


def run_facts(**changes):
    facts = dict(max_steps=20, group_size=8, groups_per_step=8, columns=("prompt", "answer", "solution"),
                 builtin_columns=("prompt", "answer", "solution"), chat=False, reference=False, source="arithmetic",
                 components=("exact_match", "env", "saas"))
    facts.update(changes)
    return RunFacts(**facts)


def test_check_run_notes_a_late_stage_two_and_a_run_without_env():
    plugin = make_plugin("saas", stage_two_step=30)
    notes = [n for n in plugin.check_run(run_facts(components=("exact_match", "saas"))) if n]
    assert len(notes) == 2 and "saas.stage_two_step" in notes[0] and "env" in notes[1]
    assert not [n for n in make_plugin("saas").check_run(run_facts()) if n]
