"""CSCR's mechanism on the built-in task: the paper's diagnostic, then accuracy against GRPO.

Held-out problems, four completions each sampled by the built-in model, re-scored under a context claiming the
rollout's outcome is correct and one claiming it is not (configs/recipes/cscr-cpu.yaml). Among the tokens both
claims shift by more than 0.1 nat, the share moved in the same direction by both (the paper: most are), and the
share of the sequence's credit CSCR leaves on the most sensitive tenth of the tokens (GRPO leaves them a tenth).
Then held-out greedy accuracy after a short run, against plain GRPO with the same steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/cscr/benchmarks/mechanism.py --seeds 0 1 --steps 20
"""

from __future__ import annotations

from pathlib import Path


from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import advantage_context, heldout_rollout
from stackrl_cscr import sensitivity

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "cscr-cpu.yaml"


def diagnostic(problems: int, seed: int) -> dict[str, float]:
    """The same-direction share of shifted tokens, and the credit CSCR leaves on the most sensitive tenth."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}"]))
    plugin = trainer.plugins.plugins["cscr"]
    rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
    ctx = advantage_context(trainer, rollout, "cscr")
    up, down, mask = plugin.shifts(ctx)
    real = mask.bool()
    shifted = (up.abs() > 0.1) & (down.abs() > 0.1) & real
    same = (up.sign() == down.sign())[shifted].float().mean().item()
    advantages = plugin.reshape_advantages(rollout.advantages, ctx)
    s = sensitivity(up, down, plugin.config.sensitivity)
    top = real & (s >= s[real].quantile(0.9))
    moving = rollout.advantages != 0  # each rollout's share: its credit on its top tokens over its whole credit
    credit = (advantages * top).sum(1)[moving] / advantages.sum(1)[moving]
    tokens = top.sum(1)[moving] / real.sum(1)[moving]
    return {"shifted": int(shifted.sum()), "same_direction": same, "top_credit": credit.mean().item(),
            "top_tokens": tokens.float().mean().item()}


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, diagnostic, ("shifted", "same_direction", "top_credit", "top_tokens"))


if __name__ == "__main__":
    main()
