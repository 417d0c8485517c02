"""SCoRe's signal on the built-in retrying model, short: one stage-II step of the CPU recipe on stackrl/arith-skills,
its 2- and 3-step 1-digit categories, where its bare retry of its own sampled attempts both fixes (0.35 of its
mistakes on 150 held-out problems) and breaks (0.12 of its right answers). On those real two-attempt trajectories
the second attempt's advantage ranks wrong -> right highest and right -> wrong lowest, the bonus's sign, while
stage I's advantages, for the same trajectories, follow the second attempt alone. The held-out self-correction
after training comes from benchmarks/mechanism.py."""

from dataclasses import replace
from itertools import combinations
from pathlib import Path

import pytest

from stackrl.rewards import exact_match
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import advantage_context, recipe_config

pytestmark = pytest.mark.mechanism

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "score-cpu.yaml"
ONE_DIGIT = 'data.options.categories=["2 steps, 1-digit","3 steps, 1-digit"]'
# Stage II's second-attempt reward, c2 + bonus * (c2 - c1), ranks the four transitions (first, second right):
# a fix above a kept right answer above a kept wrong one above a break.
RANK = {(False, True): 3, (True, True): 2, (False, False): 1, (True, False): 0}


def attempts(rollout, advantages):
    """Per row: (group, (first right, second right), first attempt's advantage, second attempt's)."""
    rows = []
    for i, (first, second) in enumerate(rollout.columns["segments"]):
        answer = rollout.columns["answer"][i]
        right = (exact_match(first.text, answer) == 1.0, exact_match(second.text, answer) == 1.0)
        group = i // rollout.group_size
        rows.append((group, right, advantages[i, first.start].item(), advantages[i, second.start].item()))
    return rows


def pairs(rows):
    """Every two rows of one group."""
    return [(a, b) for a, b in combinations(rows, 2) if a[0] == b[0]]


def test_the_second_attempt_advantage_ranks_fixes_highest_and_breaks_lowest_stage_one_only_the_second_answer(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "score.stage_two_step=0", ONE_DIGIT])  # fmt: skip
    trainer = train_steps(config)
    rollout = trainer._rollouts["train"]
    assert set(rollout.columns["score_stage"]) == {2}
    stage_two = attempts(rollout, rollout.advantages)
    compared = {tuple(sorted((RANK[a[1]], RANK[b[1]]), reverse=True)) for a, b in pairs(stage_two) if a[1] != b[1]}
    # The batch holds the model's fixes next to kept right answers and its breaks next to kept wrong ones, in the
    # same groups: the comparisons a missing or flipped bonus would change.
    assert {(3, 2), (1, 0)} <= compared, compared
    for a, b in pairs(stage_two):
        high, low = (a, b) if RANK[a[1]] >= RANK[b[1]] else (b, a)
        if RANK[high[1]] == RANK[low[1]]:
            assert high[3] == low[3], (high, low)
        else:
            assert high[3] > low[3], (high, low)  # fix > kept right > kept wrong > break, within each group
        if high[1][0] != low[1][0]:  # the first attempt: its own correctness
            right, wrong = (high, low) if high[1][0] else (low, high)
            assert right[2] > wrong[2], (right, wrong)

    # The same trajectories in stage I: the first attempt gets no advantage, the second only its correctness's.
    plugin = trainer.plugins.plugins["score"]
    in_stage_one = replace(rollout, columns={**rollout.columns, "score_stage": [1] * len(rollout)})
    ctx = advantage_context(trainer, in_stage_one, "score", reward="score")
    stage_one = attempts(rollout, plugin.estimate_advantages(ctx=ctx))
    assert [row for row in stage_one if row[2] != 0.0] == []
    for a, b in pairs(stage_one):
        if a[1][1] == b[1][1]:
            assert a[3] == b[3], (a, b)  # a fix and a kept right answer alike, a break and a kept wrong one alike
        else:
            assert (a[3] > b[3]) == a[1][1], (a, b)
