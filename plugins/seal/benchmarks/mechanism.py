"""SEAL's mechanism on the built-in task: a self-edit whose update helps the copy answer earns the higher reward.

Held-out problems, four completions each sampled by the built-in model; each completion is a self-edit, applied to
a scratch copy of the policy by the inner loop of configs/recipes/seal-cpu.yaml, whose greedy answer then decides
the reward (the copy's accuracy less the live policy's). We average the reward over the right self-edits (final
answer correct) and over the wrong ones, and give the share of self-edits whose update changed the copy's answer
(a non-zero reward), the live policy's greedy accuracy (baseline) and the copies' (adapted). Then held-out greedy
accuracy after a short run of the recipe, against plain GRPO (the recipe without the plugin, on exact_match).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/seal/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

from pathlib import Path

import torch

from stackrl.config import load_config
from stackrl.context import RewardContext
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import heldout_rollout

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "seal-cpu.yaml"


def seal_rewards(trainer, rollout) -> tuple[torch.Tensor, dict[str, float]]:
    """The plugin's reward of each row of ``rollout`` under ``trainer``'s policy, and what it logged."""
    logged = {}
    ctx = RewardContext(step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                        _log=logged.__setitem__, _plugin="seal", rollout=rollout)
    rewards = trainer.plugins.plugins["seal"].reward(ctx)
    return torch.tensor([float("nan") if r is None else r for r in rewards]), logged


def reward_by_correctness(problems: int, seed: int, overrides=()) -> dict[str, float]:
    """The mean reward of right and of wrong self-edits on ``problems`` held-out problems (four each), the share of
    non-zero rewards, and the live policy's and the copies' greedy accuracy."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}", *overrides]))
    rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
    rewards, logged = seal_rewards(trainer, rollout)
    right = rollout.rewards["exact_match"] == 1
    return {"right": rewards[right].mean().item(), "wrong": rewards[~right].mean().item(),
            "nonzero": (rewards != 0).float().mean().item(),
            "baseline": logged["seal/baseline"], "adapted": logged["seal/adapted"]}


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, reward_by_correctness,
              ("right", "wrong", "nonzero", "baseline", "adapted"))


if __name__ == "__main__":
    main()
