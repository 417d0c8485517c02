"""TRLOO's mechanism on the built-in task: with the completion left out of its baseline, the expected advantage
of a completion is its true advantage; GRPO's self-inclusive baseline shrinks it by 1 - 1/N.

Held-out problems, each with K completions sampled by the built-in model in groups of the recipe's size N. The
gradient is linear in the advantages, so its bias is that of the advantage given the completion:
E[A_i | y_i] = c (r_i - p), p the problem's pass rate. We estimate c within each problem as
sum_i A_i (r_i - m) / (K / (K - 1) sum_i (r_i - m)^2), m the mean of the problem's K rewards: the advantages of a
problem's groups sum to 0, so the numerator is sum_i A_i r_i, whose expectation is c K p (1 - p), and the
denominator is the unbiased estimate of K p (1 - p) from the same rewards (their noise largely cancels). c is 1
for TRLOO's advantages and 1 - 1/N for the group-mean-centred reward GRPO baselines with. Then held-out greedy
accuracy after a short run, against plain GRPO with the same settings and steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/trloo/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import advantage_context, heldout_rollout

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "trloo-cpu.yaml"


def scale(advantages: torch.Tensor, rewards: torch.Tensor, per_problem: int) -> float:
    """c in E[A_i | y_i] = c (r_i - p), from each row's advantage and reward, ``per_problem`` rows a problem."""
    by_problem = rewards.view(-1, per_problem)
    centred = (by_problem - by_problem.mean(1, keepdim=True)).flatten()
    return float((advantages * centred).sum() / ((centred**2).sum() * per_problem / (per_problem - 1)))


def advantage_scale(problems: int, seed: int, groups: int = 4) -> dict[str, float]:
    """The scale c of TRLOO's advantages and of GRPO's group-centred reward on ``problems`` held-out problems,
    ``groups`` groups of the recipe's size each."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}"]))
    size = trainer.args.num_generations
    rollout = dataclasses.replace(heldout_rollout(trainer, problems, seed=1000 + seed, group_size=groups * size),
                                  group_size=size)
    rewards = rollout.rewards["exact_match"]
    trloo = trainer.plugins.plugins["trloo"].estimate_advantages(advantage_context(trainer, rollout, "trloo"))
    centred = (rewards.view(-1, size) - rewards.view(-1, size).mean(1, keepdim=True)).flatten()
    return {
        "c_trloo": scale(trloo, rewards, groups * size),
        "c_grpo_centred": scale(centred, rewards, groups * size),
        "one_minus_1/N": 1 - 1 / size,
    }


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, advantage_scale, ("c_trloo", "c_grpo_centred", "one_minus_1/N"))


if __name__ == "__main__":
    main()
