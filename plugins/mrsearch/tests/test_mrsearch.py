"""Tests of the `mrsearch` plugin: the conformance suite, the attempt-level credit on hand-built rows, and the
attempts environment on the built-in search tool."""

import pytest
import torch

from stackrl.blocks.turns import Segment
from stackrl.errors import ConfigError
from stackrl.testing.conformance import PluginConformance
from stackrl_mrsearch.attempts import REFLECT, Attempts, rule_reflection
from stackrl_mrsearch.credit import action_attempts, attempt_advantages, attempt_values, token_advantages


class TestConformance(PluginConformance):
    plugin_name = "mrsearch"
    stacked_with = ("env",)  # its rows: the env plugin's default episodes (the calculator: one attempt each)
    refused_settings = [
        ({"improve": -1.0}, "must be at least 0"),
        ({"discount": 1.5}, r"must lie in \[0, 1\]"),
    ]


# -- the credit on hand-built rows -------------------------------------------------------------------------------
# One group of 4 rows, attempt rewards (exact match): [0, 1], [0, 0], [1, 1], [0] (the last never reached attempt 2).
REWARDS = [[0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0]]


def test_each_attempt_is_compared_with_the_same_attempt_of_the_groups_other_rows_leave_one_out():
    a = attempt_advantages(REWARDS, 4, discount=0.0)
    # attempt 1: rewards 0, 0, 1, 0 -> each less the mean of the other three
    assert a[0][0] == pytest.approx(0 - 1 / 3) and a[2][0] == pytest.approx(1 - 0)
    # attempt 2: rows 0-2 reached it (1, 0, 1); row 3 did not and has no attempt 2
    assert a[0][1] == pytest.approx(1 - 0.5) and a[1][1] == pytest.approx(0 - 1) and len(a[3]) == 1


def test_an_attempt_carries_the_later_attempts_advantages_discounted():
    a = attempt_advantages(REWARDS, 4, discount=1.0)
    assert a[0] == pytest.approx([(0 - 1 / 3) + 0.5, 0.5])
    assert a[1] == pytest.approx([(0 - 1 / 3) - 1, -1])
    half = attempt_advantages(REWARDS, 4, discount=0.5)
    assert half[1] == pytest.approx([(0 - 1 / 3) - 0.5, -1])


def test_improve_rewards_an_attempt_for_beating_the_one_before():
    assert attempt_values(REWARDS, 0.0) == REWARDS
    # v_a = r_a + 2 (r_a - r_{a-1}), r_{-1} = 0
    assert attempt_values(REWARDS, 2.0) == [[0, 3], [0, 0], [3, 1], [0]]


def test_a_lone_attempt_and_a_group_that_agrees_get_nothing():
    assert attempt_advantages([[1.0, 0.0], [1.0]], 2, 1.0) == [[0.0, 0.0], [0.0]]


def test_actions_take_their_attempt_from_the_environments_info_and_the_tokens_their_attempts_credit():
    # row 0: search (attempt 0), wrong answer (0), right answer (1); row 1: answer (0), answer (1), both wrong.
    infos = [[{"attempt": 0}, {"attempt": 0}, {"unparsed": True}, {"attempt": 1}],
             [{"attempt": 0}, {"attempt": 1}]]
    assert action_attempts(infos) == [[0, 0, 0, 1], [0, 1]]
    turn_rewards = [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0]]
    segments = [[Segment("action", k, 2 * k, 2 * k + 1, "") for k in range(4)],
                [Segment("action", k, 2 * k, 2 * k + 1, "") for k in range(2)]]
    tokens, rewards = token_advantages(turn_rewards, infos, segments, 2, 8, improve=0.0, discount=1.0)
    assert rewards == [[0.0, 1.0], [0.0, 0.0]]
    # attempt 1 is level (0 and 0); attempt 2: +1 and -1, carried back to attempt 1 with discount 1
    want0 = torch.tensor([1.0, 0, 1, 0, 1, 0, 1, 0])
    assert torch.equal(tokens[0], want0) and torch.equal(tokens[1], -want0 * (torch.arange(8) < 4))


# -- the environment ---------------------------------------------------------------------------------------------
ROW = {"prompt": "What is (kavo + 4) * 3?\n", "question": "What is (kavo + 4) * 3?\n", "answer": "123"}


def test_attempts_run_the_tool_score_each_answer_and_reflect_between_attempts():
    from stackrl.tasks.lookup import NAMES, value_of

    name = NAMES[0]
    row = dict(ROW, question=f"What is {name} + 1?\n", answer=str(value_of(name) + 1))
    env = Attempts(attempts=2, attempt_turns=2)
    assert env.reset(**row, seed=3) is None  # the prompt alone, as the search tool's episodes start
    shown, reward, done, info = env.step("<search>zzzz</search>")
    assert shown == "no results" and reward == 0 and not done and info == {"attempt": 0, "tool": "search"}
    shown, reward, done, info = env.step("The answer is 5.")
    assert reward == 0 and not done and info["attempt"] == 0 and info["correct"] is False
    assert shown == f"reflection: zzzz not found.\ntry again.\nWhat is {name} + 1?"
    found, *_ = env.step(f"<search>{name}</search>")
    assert f"{name} is {value_of(name)}." in found
    shown, reward, done, info = env.step(f"The answer is {value_of(name) + 1}.")
    assert shown is None and reward == 1.0 and done and info == {"attempt": 1, "answer": True, "correct": True}


def test_an_attempt_past_its_tool_turns_closes_unanswered_and_policy_reflection_asks_the_policy():
    env = Attempts(attempts=2, attempt_turns=1, reflection="policy")
    env.reset(**ROW)
    env.step("<search>a</search>")
    shown, reward, done, info = env.step("<search>b</search>")
    assert reward == 0 and not done and info["unanswered"] and shown == REFLECT + "\nWhat is (kavo + 4) * 3?"


def test_rule_reflection_says_what_was_searched_and_whether_it_was_found():
    assert rule_reflection([]) == "reflection: no search. try again."
    assert rule_reflection([("kavo", "kavo is 37."), ("x", "no results")]) == (
        "reflection: kavo found.\nreflection: x not found.\ntry again.")


@pytest.mark.parametrize("kwargs, message", [
    ({"attempts": 0}, "env.kwargs.attempts"),
    ({"attempt_turns": -1}, "env.kwargs.attempt_turns"),
    ({"reflection": "judge"}, "env.kwargs.reflection"),
    ({"inner": "tictactoe"}, "env.kwargs.inner: 'tictactoe' is a text game"),
    ({"inner": "nowhere"}, "env.kwargs.inner"),
])
def test_bad_environment_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Attempts(**kwargs)


def test_an_answer_list_accepts_any_of_its_answers():
    env = Attempts(attempts=1, answer_column="golden_answers")
    env.reset(prompt="Who?", golden_answers=["Ada Lovelace", "Lovelace"])
    assert env.step("The answer is Lovelace.")[1:3] == (1.0, True)
