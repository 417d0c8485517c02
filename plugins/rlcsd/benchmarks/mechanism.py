"""RLCSD's mechanism on the built-in task: the contrast points toward the right answer, on the answer's tokens.

Held-out problems, four completions each sampled by the built-in model. RLCSD's signal is the contrast between the
policy shown another correct rollout of the group and shown the group's other wrong ones
(configs/recipes/rlcsd-cpu.yaml); only the rows whose group has both get it. On the digits of each such rollout's
final answer we average it over correct and over wrong rollouts: positive on the first (the correct hint backs
them), negative on the second. We also compare the share of the contrast's absolute
mass and of the plain gap's (OPSD's signal) on digit tokens, the task-bearing ones here, against "=", operators,
line breaks and "The answer is" (style). Then held-out greedy accuracy after a short run, against plain GRPO.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rlcsd/benchmarks/mechanism.py --seeds 0 1 --steps 20
"""

from __future__ import annotations

from pathlib import Path

import torch

from stackrl.blocks.tokensignals import SignalContext, TokenSignals
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import advantage_context, heldout_rollout, line_index

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rlcsd-cpu.yaml"


def signal_shares(problems: int, seed: int) -> dict[str, float]:
    """The mean contrast on the final answer's digits of correct and of wrong rollouts; the share of |contrast| and
    of |gap| on digit tokens, and the share of digit tokens."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}"]))
    plugin = trainer.plugins.plugins["rlcsd"]
    rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
    ctx = advantage_context(trainer, rollout, "rlcsd")
    contrast, mask = plugin.contrast(ctx)  # mask: the tokens of the rows with both hints
    gap = TokenSignals.of(ctx).gap(SignalContext("reference", plugin.config.positive_template))
    decode = trainer.processing_class.decode
    digits, answer = torch.zeros_like(mask, dtype=torch.bool), torch.zeros_like(mask, dtype=torch.bool)
    for i, ids in enumerate(rollout.completion_ids):
        digits[i, : len(ids)] = torch.tensor([decode([t]).strip().isdigit() for t in ids], dtype=torch.bool)
        lines = line_index(trainer.processing_class, ids)
        answer[i, : len(ids)] = torch.tensor([line == lines[-1] for line in lines]) & digits[i, : len(ids)]
    digits, answer = digits & mask.bool(), answer & mask.bool()  # the rows with both hints only
    correct = (rollout.rewards["exact_match"] == 1).unsqueeze(1)
    share = lambda signal: (signal.abs() * digits).sum().item() / (signal.abs() * mask).sum().item()  # noqa: E731
    return {
        "answer_correct": contrast[answer & correct].mean().item(),
        "answer_wrong": contrast[answer & ~correct].mean().item(),
        "hinted_rows": (mask.sum(1) > 0).float().mean().item(),
        "contrast": share(contrast), "gap": share(gap), "tokens": (digits.sum() / mask.sum()).item(),
    }


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, signal_shares,
              ("answer_correct", "answer_wrong", "hinted_rows", "contrast", "gap", "tokens"))


if __name__ == "__main__":
    main()
