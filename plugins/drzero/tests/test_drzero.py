"""Dr. Zero's HRPO: hand-computed cluster advantages, the cluster keys, and the hook on a hand-built rollout."""

import pytest
import torch

from stackrl import ConfigError
from stackrl.context import AdvantageContext, Rollout
from stackrl.plugin import RunFacts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import grpo_advantages
from stackrl_drzero import Drzero, cluster_advantages, cluster_keys, operators, pooled_rows

NAN = float("nan")


class TestConformance(PluginConformance):
    plugin_name = "drzero"
    refused_settings = [
        ({"key": "hops"}, "drzero.key: must be one of column, steps, skeleton, not 'hops'"),
        ({"column": ""}, "drzero.column: must name a data column"),
        ({"epsilon": 0.0}, "drzero.epsilon: must be above 0"),
    ]


def test_each_reward_is_standardised_over_its_cluster_not_its_prompt():
    """Cluster a: rewards 1, 0, 0 (mean 1/3, std sqrt(1/3)); cluster b: 1, 1, 0, 0 (mean 1/2, std sqrt(1/3))."""
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    keys = ["a", "a", "b", "b", "a", "b", "b"]
    s = (1 / 3) ** 0.5
    expected = [(1 - 1 / 3) / s, -1 / 3 / s, 0.5 / s, -0.5 / s, -1 / 3 / s, 0.5 / s, -0.5 / s]
    torch.testing.assert_close(cluster_advantages(rewards, keys, epsilon=0.0), torch.tensor(expected))


def test_without_the_std_the_reward_is_centred_on_the_cluster_mean():
    rewards = torch.tensor([0.2, 0.8, 0.5, 1.0])
    torch.testing.assert_close(cluster_advantages(rewards, ["x", "x", "y", "y"], scale_by_std=False),
                               torch.tensor([-0.3, 0.3, -0.25, 0.25]))


def test_epsilon_is_added_to_the_spread_and_an_even_cluster_gets_nothing():
    rewards = torch.tensor([1.0, 0.0, 0.7, 0.7, 0.7])
    # std of (1, 0) with Bessel's correction is sqrt(1/2); the 0.7s have no spread: 0 / epsilon = 0
    torch.testing.assert_close(cluster_advantages(rewards, [1, 1, 2, 2, 2], epsilon=0.1),
                               torch.tensor([0.5 / (0.5**0.5 + 0.1), -0.5 / (0.5**0.5 + 0.1), 0.0, 0.0, 0.0]))


def test_a_lone_row_gets_its_reward_and_unscored_rows_stay_out():
    """The authors' singleton cluster: mean 0 and std 1, so the advantage is the reward over 1 + epsilon."""
    rewards = torch.tensor([0.6, NAN, 1.0, 0.0, NAN])
    torch.testing.assert_close(cluster_advantages(rewards, ["a", "a", "b", "b", "b"], epsilon=1e-6),
                               torch.tensor([0.6 / (1 + 1e-6), 0.0, 0.5 / 0.5**0.5, -0.5 / 0.5**0.5, 0.0]))


def test_one_cluster_per_prompt_is_grpo():
    """Keys equal to the prompt groups give GRPO's advantages: HRPO differs only in what it pools."""
    rewards = torch.rand(12, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(cluster_advantages(rewards, [i // 3 for i in range(12)], epsilon=1e-4),
                               grpo_advantages(rewards, 3), atol=1e-4, rtol=1e-4)


def test_the_keys_read_the_question_or_the_column():
    assert operators("What is ((3 + 4) * 2) - 5?\n") == ["+", "*", "-"]
    assert operators([{"role": "user", "content": "What is (kavo - 4) * 3?"}]) == ["-", "*"]
    assert operators("Say hello.") is None
    rollout = _rollout(["What is (3 + 4) * 2?\n", "What is (1 - 1) + 2?\n", "What is 5 * 2?\n", "Hi"],
                       category=["2 steps, 1-digit", None, "2 steps, 1-digit", "3 steps, 1-digit"])
    assert cluster_keys(rollout, "steps", "") == [("structure", 2), ("structure", 2), ("structure", 1), ("prompt", 1)]
    assert cluster_keys(rollout, "skeleton", "")[:3] == [("structure", "+ *"), ("structure", "- +"), ("structure", "*")]
    assert cluster_keys(rollout, "column", "category") == [
        ("structure", "2 steps, 1-digit"), ("prompt", 0), ("structure", "2 steps, 1-digit"), ("structure", "3 steps, 1-digit")]
    assert cluster_keys(_rollout(["q", "q"], hops=[["a", "b"], 2]), "column", "hops") == [
        ("structure", "['a', 'b']"), ("structure", "2")]


def test_pooled_rows_are_those_whose_cluster_spans_prompts():
    scored = torch.tensor([True, True, True, True, True, False])
    assert pooled_rows(["a", "a", "b", "a", "c", "c"], scored, 2).tolist() == [True, True, False, True, False, False]


def test_the_hook_pools_questions_of_one_category_across_prompts():
    """Two prompts of one category and one of another, two completions each: the first four rows share a
    baseline; the last two are their own cluster. Unscored rows count neither in a baseline nor as acted on."""
    acted, logged = [], []
    prompts = ["What is 1 + 2?\n"] * 2 + ["What is 3 - 1?\n"] * 2 + ["What is (2 + 3) * 4?\n"] * 2
    rollout = _rollout(prompts, category=["A"] * 4 + ["B"] * 2,
                       rewards={"exact_match": torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, NAN])})
    ctx = AdvantageContext(step=0, tokenizer=None, policy=None, _log=lambda *a: logged.append(a), _plugin="drzero",
                           _acted=lambda *args: acted.append(args[1:3]), rollout=rollout,
                           total_reward=torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0]))
    s = 0.5  # std of (1, 0, 1, 1) with Bessel's correction: sqrt(0.75 / 3)
    expected = torch.tensor([0.25 / s, -0.75 / s, 0.25 / s, 0.25 / s, 0.0, 0.0])
    torch.testing.assert_close(Drzero().estimate_advantages(ctx), expected, atol=1e-5, rtol=1e-5)
    assert acted == [(4.0, 6.0)]


def test_a_run_without_the_column_is_refused():
    facts = RunFacts(max_steps=2, group_size=2, groups_per_step=2, columns=("question", "answer"),
                     builtin_columns=(), chat=False, reference=False, source="mine", components=("exact_match",))
    with pytest.raises(ConfigError, match="drzero.column: data.source \\(mine\\) has no column 'category'"):
        Drzero().check_run(facts)
    Drzero(Drzero.Config(key="steps")).check_run(facts)


def _rollout(prompts, rewards=None, **columns):
    return Rollout(prompts=prompts, completions=["a"] * len(prompts), prompt_ids=[[1]] * len(prompts),
                   completion_ids=[[2]] * len(prompts), columns=columns, group_size=2, rewards=rewards or {})
