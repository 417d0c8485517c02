"""RLRT's mechanism on the built-in task: the self-driven tokens of correct rollouts get boosted credit.

Held-out problems, four completions each sampled by the built-in model; GRPO's advantages, reshaped by RLRT as
configs/recipes/rlrt-cpu.yaml sets it. On correct rollouts with a positive advantage, a token is self-driven when
the policy shown the worked solution gives it at least `self_driven_margin` nats less than the student. We count
them per correct rollout and compare their credit with GRPO's (the ratio A_t / A), under RLRT and under RLSD's
unreversed rule. Then held-out greedy accuracy after a short run, against plain GRPO with the same steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rlrt/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path


from stackrl.blocks.tokensignals import SignalContext, TokenSignals, magnitude_weights, reallocate
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import advantage_context, heldout_rollout

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rlrt-cpu.yaml"


def boosted(problems: int, seed: int) -> dict[str, float]:
    """Self-driven tokens per correct rollout, and their mean credit relative to GRPO's under RLRT and RLSD."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}"]))
    plugin = trainer.plugins.plugins["rlrt"]
    rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
    ctx = advantage_context(trainer, rollout, "rlrt")
    rlrt = plugin.reshape_advantages(rollout.advantages, ctx)
    signals = TokenSignals.of(ctx)
    gap = signals.gap(SignalContext("teacher", plugin.config.teacher_template))
    rlsd = reallocate(rollout.advantages, magnitude_weights(gap, rollout.advantages, signals.mask, plugin.config.clip),
                      signals.mask)
    rows = (rollout.rewards["exact_match"] == 1) & (rollout.advantages > 0)
    self_driven = (gap < -plugin.config.self_driven_margin) & signals.mask.bool() & rows.unsqueeze(1)
    base = rollout.advantages.unsqueeze(1).expand_as(gap)
    return {
        "correct_rows": int(rows.sum()),
        "per_correct_row": self_driven.sum().item() / max(1, int(rows.sum())),
        "rlrt_ratio": (rlrt / base)[self_driven].mean().item(),
        "rlsd_ratio": (rlsd / base)[self_driven].mean().item(),
    }


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, boosted, ("correct_rows", "per_correct_row", "rlrt_ratio", "rlsd_ratio"))


if __name__ == "__main__":
    main()
