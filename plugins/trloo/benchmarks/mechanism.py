"""TRLOO's mechanism on the built-in task: with the completion left out of its baseline, the expected advantage
of a completion is its true advantage; GRPO's self-inclusive baseline shrinks it by 1 - 1/N.

Held-out problems, each with many completions sampled by the built-in model: the first ``reference`` estimate
the problem's pass rate p, the rest form groups of the recipe's size N. The gradient is linear in the advantages,
so its bias is that of the advantage given the completion: E[A_i | y_i] = c (r_i - p). We estimate c as
sum_i A_i (r_i - p^) / sum_i p^ (1 - p^) M / (M - 1) (p^ from the M reference samples, independent of the groups,
so both sums are unbiased): 1 for TRLOO's advantages, 1 - 1/N for the group-mean-centred reward GRPO baselines
with. Then held-out greedy accuracy after a short run, against plain GRPO with the same settings and steps.

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


def scale(advantages: torch.Tensor, rewards: torch.Tensor, pass_rates: torch.Tensor, reference: int) -> float:
    """c in E[A_i | y_i] = c (r_i - p): each row's advantage, reward and its problem's reference pass rate."""
    spread = pass_rates * (1 - pass_rates) * reference / (reference - 1)
    return float((advantages * (rewards - pass_rates)).sum() / spread.sum())


def advantage_scale(problems: int, seed: int, reference: int = 32, groups: int = 4) -> dict[str, float]:
    """The scale c of TRLOO's advantages and of GRPO's group-centred reward on ``problems`` held-out problems,
    ``reference`` samples each for the pass rate and ``groups`` groups of the recipe's size."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}"]))
    size = trainer.args.num_generations
    drawn = heldout_rollout(trainer, problems, seed=1000 + seed, group_size=reference + groups * size)
    by_problem = drawn.rewards["exact_match"].view(problems, -1)
    pass_rates = by_problem[:, :reference].mean(1).repeat_interleave(groups * size)
    grouped = torch.cat([i * (reference + groups * size) + torch.arange(reference, reference + groups * size)
                         for i in range(problems)]).tolist()
    rollout = dataclasses.replace(drawn.select(grouped), group_size=size)
    rewards = rollout.rewards["exact_match"]
    trloo = trainer.plugins.plugins["trloo"].estimate_advantages(advantage_context(trainer, rollout, "trloo"))
    centred = (rewards.view(-1, size) - rewards.view(-1, size).mean(1, keepdim=True)).flatten()
    return {
        "c_trloo": scale(trloo, rewards, pass_rates, reference),
        "c_grpo_centred": scale(centred, rewards, pass_rates, reference),
        "one_minus_1/N": 1 - 1 / size,
    }


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, advantage_scale, ("c_trloo", "c_grpo_centred", "one_minus_1/N"))


if __name__ == "__main__":
    main()
