"""Octopus's mechanism on the built-in retrying model, short: one step of the CPU recipe on stackrl/arith-skills, 8
groups of 16 rows, 8 of them sampled. The held-out self-correction after training comes from benchmarks/mechanism.py."""

from pathlib import Path

import pytest
import torch

from stackrl.rewards import exact_match
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config

pytestmark = pytest.mark.mechanism

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "octopus-cpu.yaml"


def outcomes(rollout) -> list[tuple[bool, bool]]:
    """Per row, whether its first and its second attempt are right, read from the texts and the hidden answers."""
    return [tuple(exact_match(s.text, answer) == 1.0 for s in segments)
            for segments, answer in zip(rollout.columns["segments"], rollout.columns["answer"])]


@pytest.mark.parametrize("stage_two_step", [1, 0])
def test_recombination_makes_fixes_dense_balances_groups_and_the_mask_keeps_conflicts_off_first_attempts(
    tmp_path, stage_two_step
):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "trainer.per_device_train_batch_size=128",
                                      f"octopus.stage_two_step={stage_two_step}"])
    rollout = train_steps(config)._rollouts["train"]
    size, pairs, right = rollout.group_size, rollout.columns["octopus_pair"], outcomes(rollout)
    # Random recombination (the paper's ablation) would give each group's extra rows the share of fixes among all its
    # candidate pairs; the selection gives them more, and more than the sampled rows have.
    fix = (False, True)
    chosen, at_random, sampled = [], [], []
    for group in range(rollout.num_groups):
        rows = list(range(group * size, (group + 1) * size))
        firsts, seconds = [right[i][0] for i in rows[: size // 2]], [right[i][1] for i in rows[: size // 2]]
        candidates = [(a, b) for a in firsts for b in seconds]
        at_random.append(candidates.count(fix) / len(candidates))
        chosen.append(sum(right[i] == fix for i in rows[size // 2 :]) / (size // 2))
        sampled.append(sum(right[i] == fix for i in rows[: size // 2]) / (size // 2))
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    assert mean(chosen) > 1.5 * mean(at_random) and mean(chosen) > 1.5 * mean(sampled), (chosen, at_random, sampled)
    # Groups that sampled both a right and a wrong final answer come out nearer half positive than they were sampled.
    before, after = [], []
    for group in range(rollout.num_groups):
        rows = range(group * size, (group + 1) * size)
        mine = [right[i][1] for i in rows][: size // 2]  # the sampled rows come first
        if 0 < sum(mine) < len(mine):
            before.append(abs(sum(mine) / len(mine) - 0.5))
            after.append(abs(sum(right[i][1] for i in rows) / size - 0.5))
    assert before and sum(after) < 0.5 * sum(before), (before, after)
    # The mask: stage I trains no first attempt; stage II trains those of rows whose attempts agree, and only those.
    for row, (segments, (a, b)) in enumerate(zip(rollout.columns["segments"], right)):
        first = rollout.advantages[row, segments[0].start : segments[0].end]
        trains = stage_two_step == 0 and a == b
        assert bool(first.abs().sum() > 0) == (trains and rollout.advantages[row, segments[1].start].item() != 0)
    # A fix earns the most: its second attempt is pushed up in every group that has one.
    fix_advantage = torch.tensor([rollout.advantages[row, s[1].start].item()
                                  for row, (s, r) in enumerate(zip(rollout.columns["segments"], right)) if r == (False, True)])
    assert fix_advantage.numel() and (fix_advantage > 0).all(), fix_advantage
