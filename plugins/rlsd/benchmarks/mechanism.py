"""RLSD's mechanism on the built-in task: on wrong rollouts the blame leaves the correct steps for the error.

Held-out problems, four completions each sampled by the built-in model; GRPO's advantages, reshaped by RLSD as
configs/recipes/rlsd-cpu.yaml sets it. On every wrong rollout with a negative advantage, the lines before the
first one that differs from the reference solution are correct steps: we compare the share of the rollout's
negative credit they get under RLSD with their share of the tokens (what GRPO gives them), and the same for the
token the teacher rejects most. Then held-out greedy accuracy after a short run, against plain GRPO with the same
settings and steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rlsd/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

import torch

from stackrl.blocks.tokensignals import SignalContext, TokenSignals
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import advantage_context, heldout_rollout, line_index

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rlsd-cpu.yaml"


def first_wrong_line(completion: str, solution: str) -> int:
    """The first line of ``completion`` that differs from the same line of the reference ``solution``."""
    lines, reference = completion.split("\n"), solution.split("\n")
    return next((i for i, line in enumerate(lines) if i >= len(reference) or line != reference[i]), len(lines) - 1)


def blame(problems: int, seed: int) -> dict[str, float]:
    """Where the negative credit of wrong rollouts lands, as a mean share per rollout: on the correct lines before
    the first wrong one (``prefix``) and on the token the teacher rejects most (``rejected``), under RLSD and under
    GRPO (each token's share of the rollout)."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}"]))
    plugin = trainer.plugins.plugins["rlsd"]
    rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
    ctx = advantage_context(trainer, rollout, "rlsd")
    advantages = plugin.reshape_advantages(rollout.advantages, ctx)
    gap = TokenSignals.of(ctx).gap(SignalContext("teacher", plugin.config.teacher_template))
    shares = {"prefix_rlsd": [], "prefix_grpo": [], "rejected_rlsd": [], "rejected_grpo": []}
    for i, ids in enumerate(rollout.completion_ids):
        if rollout.advantages[i] >= 0 or not ids:
            continue
        lines = torch.tensor(line_index(trainer.processing_class, ids))
        prefix = lines < first_wrong_line(rollout.completions[i], rollout.columns["solution"][i])
        credit = advantages[i, : len(ids)]
        shares["prefix_rlsd"].append((credit[prefix].sum() / credit.sum()).item())
        shares["prefix_grpo"].append(prefix.float().mean().item())
        shares["rejected_rlsd"].append((credit[gap[i, : len(ids)].argmin()] / credit.sum()).item())
        shares["rejected_grpo"].append(1 / len(ids))
    rows = len(shares["prefix_grpo"])
    return {**{key: sum(values) / rows for key, values in shares.items()}, "rows": rows}


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, blame,
              ("prefix_rlsd", "prefix_grpo", "rejected_rlsd", "rejected_grpo", "rows"))


if __name__ == "__main__":
    main()
