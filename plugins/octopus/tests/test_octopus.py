"""Octopus: pairs recombined from a group's attempts, balanced; the shaped reward; the selective first-attempt mask."""

import random
from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.turns import Segment
from stackrl.rewards import exact_match
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_octopus import Octopus, OctopusConfig, correction_reward, select_pairs
from stackrl_octopus.selection import BREAK, FIX, KEEP, KINDS, MISS

T, F = True, False
SKILLS = {"name_or_path": "stackrl/arith-skills"}
EASY = {"options": {"categories": ["2 steps, 1-digit", "3 steps, 1-digit"]}}


class TestConformance(PluginConformance):
    plugin_name = "octopus"
    refused_settings = [
        ({"sampled_share": 0.0}, "octopus.sampled_share: must be in"),
        ({"selection": "random"}, "octopus.selection: must be one of"),
        ({"format_weight": 1.5}, "octopus.format_weight: must be in"),
        ({"stage_two_step": -1}, "octopus.stage_two_step: must be 0 or more"),
        ({"first_attempt_kl": -0.1}, "octopus.first_attempt_kl: must be 0 or more"),
        ({"marker": " "}, "octopus.marker: must hold the instruction"),
        ({"metric": "octopus"}, "octopus.metric: must be a built-in outcome reward"),
    ]


def kinds(pairs, first, second):
    return sorted(KINDS[first[i], second[j]] for i, j in pairs)


# Four sampled rows of a group of eight: first attempts wrong, wrong, right, right; second attempts wrong, right,
# right, wrong. Two of the sampled rows end right: the group needs two more positives for half of eight.
FIRST, SECOND = [F, F, T, T], [F, T, T, F]


def test_the_authors_code_takes_half_the_missing_positives_as_fixes_half_as_keeps_then_one_break():
    pairs = select_pairs(FIRST, SECOND, extra=4, group_size=8, rule="code", rng=random.Random(0))
    assert kinds(pairs, FIRST, SECOND) == sorted([FIX, KEEP, BREAK, MISS])
    assert len(pairs) == 4


def test_the_authors_code_takes_fixes_before_keeps_when_room_is_short():
    first, second = [F, F, F, F, T, T], [T, F, F, F, F, F]  # one sampled row right: two positives missing each
    pairs = select_pairs(first, second, extra=2, group_size=8, rule="code", rng=random.Random(0))
    assert kinds(pairs, first, second) == [FIX, FIX]


def test_the_paper_takes_the_missing_positives_as_fixes_first_then_negatives_and_never_a_row_with_itself():
    for seed in range(5):
        pairs = select_pairs(FIRST, SECOND, extra=4, group_size=8, rule="paper", rng=random.Random(seed))
        found = kinds(pairs, FIRST, SECOND)
        assert found.count(FIX) == 2 and found.count(KEEP) == 0 and found.count(BREAK) + found.count(MISS) == 2
        assert all(i != j for i, j in pairs)


def test_the_paper_falls_back_on_keeps_when_fixes_run_out():
    first, second = [F, T, T, T], [F, F, T, F]  # one sampled row right in the end; one wrong -> right pair (0, 2)
    pairs = select_pairs(first, second, extra=4, group_size=8, rule="paper", rng=random.Random(0))
    found = kinds(pairs, first, second)
    assert found.count(FIX) == 1 and found.count(KEEP) == 2 and found.count(BREAK) + found.count(MISS) == 1


def test_the_paper_draws_at_random_where_every_sampled_row_is_right():
    first, second = [T, F, T, T], [T, T, T, T]
    pairs = select_pairs(first, second, extra=4, group_size=8, rule="paper", rng=random.Random(0))
    assert len(set(pairs)) == 4 and all(i != j for i, j in pairs)


def test_unanswered_attempts_are_never_paired_and_copies_fill_what_is_missing():
    for rule in ("code", "paper"):
        # The only answered pair is row 1's first attempt with row 0's second, a fix; then copies of the rows.
        pairs = select_pairs([None, F], [T, None], extra=3, group_size=5, rule=rule, rng=random.Random(0))
        assert pairs == [(1, 0), (0, 0), (1, 1)]
        assert select_pairs([None, F], [None, None], extra=3, group_size=5, rule=rule, rng=random.Random(0)) == [
            (0, 0), (1, 1), (0, 0)]


def test_the_code_rule_may_pair_a_row_with_itself_the_paper_never():
    first, second = [F, T], [T, F]  # one row ends right: no positive missing at half of four
    # The code takes one right -> wrong pair, and the only one is row 1 with itself; the paper's one positive
    # missing is the keep of row 1's first attempt with row 0's second (row 0 with itself, the fix, is no candidate).
    assert select_pairs(first, second, extra=1, group_size=4, rule="code", rng=random.Random(0)) == [(1, 1)]
    assert select_pairs(first, second, extra=1, group_size=4, rule="paper", rng=random.Random(0)) == [(1, 0)]


@pytest.mark.parametrize(
    "first, second, identical, expected",
    [
        (F, T, False, 0.9 * 1.0 + 0.1),  # a fix
        (T, T, False, 0.9 * 0.75 + 0.1),  # a keep
        (F, F, False, 0.1),  # a miss
        (T, F, False, 0.9 * -0.25 + 0.1),  # a break
        (T, T, True, 0.9 * 0.5 + 0.1),  # a copy is capped
        (None, T, False, 0.0),  # no first answer: capped at 0, no format reward
        (F, None, False, 0.0),  # no second answer: a miss, no format reward
    ],
)
def test_the_shaped_reward_of_a_pair(first, second, identical, expected):
    assert correction_reward(first, second, identical, OctopusConfig()) == pytest.approx(expected)


def test_stage_one_masks_every_first_attempt_stage_two_those_whose_correctness_changes():
    right, wrong = "The answer is 4.", "The answer is 5."
    rows = [(right, right), (wrong, right), (right, wrong), (wrong, wrong), ("no answer", right)]
    segments = [[Segment("answer", 0, 0, 2, a), Segment("answer", 1, 3, 5, b)] for a, b in rows]
    rollout = SimpleNamespace(columns={"segments": segments, "answer": ["4"] * 5, "octopus_stage": [2] * 5})
    assert Octopus().masked_first(rollout) == [False, True, True, False, True]
    rollout.columns["octopus_stage"] = [1] * 5
    assert Octopus().masked_first(rollout) == [True] * 5


def test_a_group_is_its_sampled_rows_then_recombinations_rewarded_and_masked_by_the_rules(make_config):
    config = make_config(
        ["octopus"], model=SKILLS, data=EASY, rewards={"exact_match": None},
        octopus={"stage_two_step": 0, "first_attempt_kl": 0.0},
        trainer={"per_device_train_batch_size": 16, "num_generations": 8, "max_completion_length": 32},
    )
    rollout = train_steps(config, steps=1)._rollouts["train"]
    size, n = rollout.group_size, 4
    for group in range(rollout.num_groups):
        rows = range(group * size, (group + 1) * size)
        attempts = [[s.text for s in rollout.columns["segments"][i]] for i in rows]
        pairs = [rollout.columns["octopus_pair"][i] for i in rows]
        assert pairs[:n] == [(i, i) for i in range(n)]  # the sampled rows first, as sampled
        for (i, j), texts in zip(pairs, attempts):  # every other row: one sampled first attempt, another's second
            assert texts == [attempts[i][0], attempts[j][1]]
    answers = rollout.columns["answer"]
    judged = [[exact_match(s.text, a) == 1.0 if "The answer is" in s.text else None for s in segs]
              for segs, a in zip(rollout.columns["segments"], answers)]
    expected = [correction_reward(a, b, s[0].text == s[1].text, OctopusConfig())
                for (a, b), s in zip(judged, rollout.columns["segments"])]
    assert rollout.rewards["octopus"].tolist() == pytest.approx(expected)
    # Stage II: a row's first attempt trains only where both attempts agree in correctness.
    for row, (segs, (a, b)) in enumerate(zip(rollout.columns["segments"], judged)):
        first = rollout.advantages[row, segs[0].start : segs[0].end]
        second = rollout.advantages[row, segs[1].start : segs[1].end]
        assert torch.all(second == second[0])
        assert torch.all(first == (second[0] if bool(a) == bool(b) else 0.0))
