"""DARE: the distribution reward, pruning and bonus by hand; on the built-in model, against majority vote."""

from pathlib import Path

import pytest
import torch

from stackrl.answers import answer_after_phrase, group_answers, groups_of
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.repository import load_script
from stackrl.truth import auroc
from stackrl_dare.plugin import distribution_rewards

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "dare"
    refused_settings = [
        ({"min_frequency": 1.5}, "dare.min_frequency must lie in"),
        ({"exploration_bonus": -0.1}, "dare.exploration_bonus must be 0 or more"),
    ]


# 8 rows: "4" three times (the majority), "5" twice, "6" once, two without an answer.
GROUP = ["4", "5", None, "4", "6", "5", None, "4"]


def test_each_row_earns_its_answers_frequency_with_the_bonus_outside_the_majority():
    group = group_answers(GROUP, math_verify=False)
    assert distribution_rewards(group, min_frequency=0.1, exploration_bonus=0.05) == pytest.approx(
        [3 / 8, 2 / 8 + 0.05, 0.0, 3 / 8, 1 / 8 + 0.05, 2 / 8 + 0.05, 0.0, 3 / 8]
    )


def test_answers_below_the_threshold_are_pruned_to_zero_without_bonus():
    group = group_answers(GROUP, math_verify=False)
    assert distribution_rewards(group, min_frequency=0.2, exploration_bonus=0.05) == pytest.approx(
        [3 / 8, 2 / 8 + 0.05, 0.0, 3 / 8, 0.0, 2 / 8 + 0.05, 0.0, 3 / 8]
    )
    # At the threshold an answer is kept: 2/8 = 0.25 is not below 0.25.
    assert distribution_rewards(group, 0.25, 0.0) == pytest.approx([3 / 8, 2 / 8, 0, 3 / 8, 0, 2 / 8, 0, 3 / 8])
    assert distribution_rewards(group, 0.3, 0.0) == pytest.approx([3 / 8, 0, 0, 3 / 8, 0, 0, 0, 3 / 8])


def test_a_right_answer_held_by_a_minority_is_rewarded_where_majority_vote_gives_it_nothing(arith_samples):
    """On groups sampled from the built-in model: majority vote pays nothing to a correct minority, DARE pays its
    share, and DARE's reward separates correct from wrong completions better over all rows."""
    completions, correct = arith_samples
    answers = [answer_after_phrase(text) for text in completions]
    dare, majority = [], []
    for group in groups_of(answers, 8, math_verify=False):
        dare.extend(distribution_rewards(group, 0.2, 0.1))
        majority.extend(float(agrees) for agrees in group.in_majority())
    correct = torch.tensor(correct)
    dare, majority = torch.tensor(dare), torch.tensor(majority)
    groups_right = correct.view(-1, 8)
    minority = groups_right.any(1) & (majority.view(-1, 8) * groups_right).sum(1).eq(0)  # right, but not the vote
    assert minority.any(), "the sample has groups whose right answer is a minority"
    right_in_minority = groups_right[minority]
    assert (majority.view(-1, 8)[minority][right_in_minority] == 0).all()
    assert (dare.view(-1, 8)[minority][right_in_minority] > 0).any()
    assert auroc(dare, correct) > auroc(majority, correct)


@pytest.fixture(scope="module")
def arith_samples(tmp_path_factory):
    """Groups of 8 completions of the built-in model to mid-difficulty training questions, and their correctness."""
    mechanism = load_script(BENCHMARK)
    return mechanism.sample_groups(questions=24, group_size=8, seed=0)


@pytest.mark.mechanism
def test_a_label_free_run_logs_every_components_truth_agreement_and_keeps_accuracy():
    """The CPU recipe, short, with a second reward component muted beside DARE: the host logs the AUROC of both
    against the hidden answers and DARE's pseudo-label accuracy; held-out pass@1 does not fall."""
    from stackrl.testing.measure import label_free_run

    recipe = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "dare-cpu.yaml"
    figures = label_free_run(recipe, [
        "plugins=[dare,digit_reward]", "rewards.digit_reward=0", "trainer.max_steps=8", "eval.size=64", "eval.samples=2",
    ])
    assert {"truth/dare/auroc", "truth/digit_reward/auroc", "truth/dare/pseudo_label_accuracy", "truth/correct"} <= set(figures)
    assert figures["truth/dare/auroc"] > 0.7  # the rewards track correctness (measured over 30 steps: 0.865)
    assert figures["after"] >= figures["before"]
