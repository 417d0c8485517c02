"""eva's rules on hand-built inputs: the regret of a group, the authors' selection weights and draw, the top
choice, the mix weight, the evolve request and the variants kept; the settings refused; the conformance suite."""

import math

import pytest
import torch

from stackrl.blocks.selfinstruct import SelfInstructSettings
from stackrl.testing.conformance import PluginConformance
from stackrl_eva.creator import arithmetic_label, evolve_request, first_problem, keep_variants
from stackrl_eva.regret import choose_parents, group_regret, mix_weight, selection_weights

NAN = float("nan")


class TestConformance(PluginConformance):
    plugin_name = "eva"
    plugin_settings = {"eva": {"every_steps": 1, "sampling": {"max_new_tokens": 16}}}
    refused_settings = [
        ({"regret": "mean"}, "one of gap, maxmean, var"),
        ({"select": "random"}, "one of weighted, top"),
        ({"every_steps": 0}, "at least 1"),
        ({"select_frac": 0.0}, r"\(0, 1\]"),
        ({"variants": 0}, "at least 1"),
        ({"label": "python"}, "one of none, arithmetic"),
        ({"evolved_share": 1.0}, "strictly between 0 and 1"),
        ({"min_words": 0}, "1 <= min <= max"),
        ({"max_similarity": 1.5}, r"\[0, 1\]"),
        ({"reward": ""}, "name the reward component"),
    ]


def test_regret_is_the_spread_of_each_groups_rewards():
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.9, 0.5, 0.6, 1.0, NAN, 1.0, 0.0])
    assert group_regret(rewards, 4, "gap")[:3] == pytest.approx([1.0, 0.0, 0.7])
    assert group_regret(rewards, 4, "maxmean")[:3] == pytest.approx([0.25, 0.0, 0.9 - 0.55])
    assert group_regret(rewards, 4, "var")[:3] == pytest.approx([0.1875, 0.0, 0.0625])
    assert all(math.isnan(group_regret(rewards, 4, kind)[3]) for kind in ("gap", "maxmean", "var"))  # an unscored row


def test_weights_are_the_regrets_min_max_normalised():
    assert selection_weights([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]
    assert selection_weights([0.5, 0.5]) == [1.0, 1.0]  # equally informative
    assert selection_weights([0.0, 0.0]) == [0.0, 0.0]  # no contrast anywhere
    assert selection_weights([]) == []


def test_top_takes_the_highest_regrets_never_the_lowest():
    regrets = {10: 0.5, 11: 1.0, 12: 0.0, 13: 1.0, 14: NAN}
    assert choose_parents(regrets, 0.5, "top") == [11, 13]  # ceil(0.5 * 4 scored rows); ties in row order
    assert choose_parents(regrets, 1.0, "top") == [11, 13, 10]  # the lowest (weight 0) never
    assert choose_parents({1: 0.0, 2: 0.0}, 1.0, "top") == []  # no prompt more informative than another
    assert choose_parents({}, 0.25) == [] and choose_parents({3: NAN}, 0.25) == []


def test_the_weighted_draw_follows_the_normalised_regrets():
    generator = torch.Generator().manual_seed(0)
    regrets = {1: 0.0, 2: 0.25, 3: 1.0}  # weights 0, 0.25, 1: one parent a round, row 3 at 0.8
    drawn = [choose_parents(regrets, 1 / 3, "weighted", generator) for _ in range(2000)]
    assert all(len(d) == 1 and d[0] in (2, 3) for d in drawn)
    assert 0.77 < sum(d == [3] for d in drawn) / len(drawn) < 0.83
    assert sorted(choose_parents(regrets, 1.0, "weighted", generator)) == [2, 3]  # without replacement


def test_mix_weight_gives_the_evolved_rows_their_share():
    weight = mix_weight(2, 8, 0.8)
    assert 2 * weight / (2 * weight + 8) == pytest.approx(0.8)
    assert mix_weight(0, 8, 0.8) == 1.0 and mix_weight(3, 0, 0.8) == 1.0


def test_the_request_lists_the_parent_alone_and_the_reply_gives_one_variant():
    text = evolve_request("What is 2 + 3?", chat=False)
    assert text == "Continue this list of problems with new ones, one problem per number:\n1. What is 2 + 3?\n2."
    chat = evolve_request("What is 2 + 3?", chat=True, system_prompt="Write problems.")
    assert chat[0] == {"role": "system", "content": "Write problems."} and chat[1]["content"].endswith("2.")
    assert first_problem(" What is 4 + 5?\n3. What is 6 + 7?\n", chat=False) == "What is 4 + 5?"
    assert first_problem("2. What is 4 + 5?\n3. What is 6 + 7?", chat=True) == "What is 4 + 5?"
    assert first_problem("A new problem:  what is 6 + 7?", chat=True) == "A new problem: what is 6 + 7?"
    assert first_problem("   \n", chat=False) is None and first_problem("", chat=True) is None


def test_variants_pass_the_rules_and_the_verifier():
    rules = SelfInstructSettings(min_words=3, max_similarity=0.99)
    candidates = [(0, "What is 2 + 3?"),  # repeats a known problem
                  (0, "What is 17 + 25?"),
                  (1, "Draw the graph of 4 + 5 please"),  # banned word
                  (1, "What is seven plus two?"),  # not the task's form: no answer
                  (2, "What is 17 + 25?")]  # repeats the variant kept before it
    kept, rejected = keep_variants(candidates, ["What is 2 + 3?\n"], rules, arithmetic_label)
    assert kept == [(0, "What is 17 + 25?", {"answer": "42", "solution": "17 + 25 = 42\nThe answer is 42."})]
    assert rejected == {"similar": 2, "banned": 1, "unverified": 1}
    kept, rejected = keep_variants(candidates, [], rules, None)  # label-free: no verifier
    assert [(p, q) for p, q, _ in kept] == [(0, "What is 2 + 3?"), (0, "What is 17 + 25?"),
                                            (1, "What is seven plus two?")]
    assert all(columns == {} for _, _, columns in kept)
