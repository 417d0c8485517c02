"""SPC: the game's outcome rule on hand-built corruptions and verdicts, and the rows the plugin builds."""

import itertools
import random

import pytest

from stackrl import RewardContext, Rollout, SampleContext
from stackrl.rewards import VERIFY
from stackrl.tasks import corrupt_prompt, judge_prompt, slip
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.scripted import ScriptedPolicy
from stackrl_spc import Spc, SpcConfig, critic_reward, sneaky_reward, valid_corruption
from stackrl_spc.plugin import JUDGED_COLUMN, SNEAKY, WRONG_COLUMN

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


def _rollout_of(policy, groups=4, **settings):
    ctx = SampleContext(step=0, tokenizer=None, policy=policy, _log=lambda *_: None, _plugin="spc", group_size=1)
    return Spc(SpcConfig(**settings)).generate_rollout([Q] * groups, ctx)


def test_critic_groups_judge_the_first_valid_drawn_corruption_or_the_right_solution():
    """Four groups of one: two sneaky, two critic, half of those on the right solution; of two drawn corruptions
    (a copy, then one slipped line) the valid one is judged."""
    policy = ScriptedPolicy({corrupt_prompt(Q, RIGHT): [RIGHT, ONE_WRONG], judge_prompt(Q, RIGHT): ["c"],
                             judge_prompt(Q, ONE_WRONG): ["c"]})
    samples = _rollout_of(policy, tries=2)
    assert policy.asked[0][0] == [corrupt_prompt(Q, RIGHT)] * 2, "tries draws for the one critic group on a corruption"
    assert samples.columns["role"] == [SNEAKY, SNEAKY, VERIFY, VERIFY]
    assert samples.columns[JUDGED_COLUMN] == [None, None, RIGHT, ONE_WRONG]
    assert samples.columns[WRONG_COLUMN] == [None, None, False, True]
    assert policy.asked[1][0] == [corrupt_prompt(Q, RIGHT)] * 2 + [judge_prompt(Q, RIGHT), judge_prompt(Q, ONE_WRONG)]


def test_with_no_valid_drawn_corruption_the_task_s_slip_is_judged():
    policy = ScriptedPolicy({corrupt_prompt(Q, RIGHT): [RIGHT, TWO_WRONG]})
    policy.replies.update({p: itertools.cycle(["c"]) for p in (judge_prompt(Q, RIGHT),)})
    fallback = slip(RIGHT, random.Random(Q))
    policy.replies[judge_prompt(Q, fallback)] = itertools.cycle(["c"])
    samples = _rollout_of(policy, tries=2, correct_share=0.0)
    assert samples.columns[JUDGED_COLUMN][2:] == [fallback, fallback] and valid_corruption(Q, fallback)


def test_each_row_earns_its_game_s_outcome():
    """Sneaky rows: a valid corruption the policy's check calls correct (+1), one it calls wrong (-1), a copy (the
    invalid reward, never judged); critic rows: a corruption called wrong (+1), the right solution called wrong (-1)."""
    caught = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 15."
    rollout = Rollout(prompts=[Q] * 5, completions=[ONE_WRONG, caught, RIGHT, "Verdict: wrong", "Verdict: wrong"],
                      prompt_ids=[[1]] * 5, completion_ids=[[2]] * 5, group_size=1,
                      columns={"role": [SNEAKY] * 3 + [VERIFY] * 2, JUDGED_COLUMN: [None] * 3 + [ONE_WRONG, RIGHT],
                               WRONG_COLUMN: [None] * 3 + [True, False]})
    policy = ScriptedPolicy({judge_prompt(Q, ONE_WRONG): ["Verdict: correct"], judge_prompt(Q, caught): ["Verdict: wrong"]})
    logged, acted = {}, []
    ctx = RewardContext(step=0, tokenizer=None, policy=policy, _log=logged.__setitem__, _plugin="spc",
                        _acted=lambda plugin, n, m, hint: acted.append((n, m)), rollout=rollout)
    plugin = Spc(SpcConfig(invalid_reward=-0.5))
    assert plugin.reward(ctx) == [1.0, -1.0, -0.5, 1.0, -1.0]
    assert policy.asked == [([judge_prompt(Q, ONE_WRONG), judge_prompt(Q, caught)], {"max_new_tokens": 128, "do_sample": False})]
    assert acted == [(5, 5)] and plugin.last_verdicts == [True, False, None, False, False]
    assert logged["spc/sneaky_valid"] == pytest.approx(2 / 3) and logged["spc/sneaky_fooled"] == 0.5
