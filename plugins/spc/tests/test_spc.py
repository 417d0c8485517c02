"""SPC: the game's outcome rule on hand-built corruptions and verdicts, and the rows the plugin builds."""

import pytest

from stackrl.testing.conformance import PluginConformance
from stackrl_spc import SpcConfig, critic_reward, sneaky_reward, valid_corruption

Q = "What is (3 + 4) * 2?\n"
RIGHT = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."
ONE_WRONG = "3 + 4 = 7\n7 * 2 = 15\nThe answer is 15."  # a slip carried on: one wrong line
TWO_WRONG = "3 + 4 = 8\n8 * 2 = 17\nThe answer is 17."
OFF_CHAIN = "3 + 5 = 8\n8 * 2 = 16\nThe answer is 16."  # every line holds, but not the question's operands


class TestConformance(PluginConformance):
    plugin_name = "spc"
    plugin_settings = {"spc": {"critic_max_tokens": 8, "tries": 1}}  # lengths are the run's cost, not what is checked
    refused_settings = [({"sneaky_share": 1.0}, r"must be in \(0, 1\)"), ({"sneaky_share": 0.0}, r"must be in \(0, 1\)"),
                        ({"correct_share": 1.0}, r"must be in \[0, 1\)"), ({"tries": 0}, "at least 1"),
                        ({"invalid_reward": 2.0}, r"must be in \[-1, 1\]"), ({"critic_temperature": -1.0}, "must be 0"),
                        ({"critic_max_tokens": 0}, "at least 1")]


def test_a_corruption_is_valid_with_exactly_one_wrong_line_of_the_question_s_chain():
    assert valid_corruption(Q, ONE_WRONG)
    assert valid_corruption(Q, "3 + 4 = 7\n7 * 2 = 14\nThe answer is 15.")  # the final answer slipped
    assert not valid_corruption(Q, RIGHT)  # a copy changes nothing
    assert not valid_corruption(Q, TWO_WRONG)
    assert not valid_corruption(Q, OFF_CHAIN)
    assert not valid_corruption(Q, "Verdict: wrong")


@pytest.mark.parametrize("valid, verdict, reward", [
    (True, False, -1.0),  # caught: the critic wins
    (True, True, 1.0),  # deceived
    (True, None, 1.0),  # no readable verdict: the error was not identified
    (False, True, -1.0), (False, False, -1.0),  # not valid: the invalid reward, whatever the verdict
])
def test_the_sneaky_generator_wins_when_a_valid_corruption_is_not_called_wrong(valid, verdict, reward):
    assert sneaky_reward(valid, verdict) == reward


def test_an_invalid_corruption_is_not_played_with_invalid_reward_null():
    assert sneaky_reward(False, True, None) is None and sneaky_reward(False, False, 0.0) == 0.0


@pytest.mark.parametrize("wrong, verdict, reward", [
    (True, False, 1.0), (True, True, -1.0), (True, None, -1.0),  # a corruption: caught, deceived, no verdict
    (False, True, 1.0), (False, False, -1.0), (False, None, -1.0),  # the right solution
])
def test_the_critic_wins_when_its_verdict_is_the_truth(wrong, verdict, reward):
    assert critic_reward(wrong, verdict) == reward


def test_the_game_is_zero_sum_on_a_played_corruption():
    for verdict in (True, False, None):
        assert sneaky_reward(True, verdict) + critic_reward(True, verdict) == 0


def test_the_defaults():
    c = SpcConfig()
    assert (c.sneaky_share, c.correct_share, c.tries, c.invalid_reward) == (0.5, 0.5, 4, -1.0)
