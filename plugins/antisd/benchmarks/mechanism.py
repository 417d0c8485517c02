"""AntiSD's gate on the built-in task: the teacher's entropy step by step under AntiSD and under plain GRPO, and
the step the gate closes at.

Four arms of configs/recipes/antisd-cpu.yaml, several seeds: "antisd" (the recipe, the bounded advantage term,
with any overrides given on the command line), "ungated" (the same term with a gate that never closes), "grpo"
(the term weighted 0 and a gate that never closes: it only watches the teacher's entropy) and "loss" (the loss
form, the JSD ascended at weight 0.1, with the recipe's gate). Prints, per seed and arm, the step the gate
closed at and the training reward over the last third of the run, then the mean teacher entropy per step of each
arm.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/antisd/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
    OMP_NUM_THREADS=1 .venv/bin/python plugins/antisd/benchmarks/mechanism.py antisd.gate_relative=false \\
        antisd.gate_threshold=0.04
"""

from __future__ import annotations

import tempfile
from pathlib import Path


from stackrl.config import load_config
from stackrl.run import build_trainer

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "antisd-cpu.yaml"
ARMS = {
    "antisd": [],
    "ungated": ["antisd.gate_threshold=0.0"],
    "grpo": ["antisd.scale=0.0", "antisd.gate_threshold=0.0"],
    "loss": ["antisd.form=loss", "losses.antisd=0.1"],
}


def run(arm: str, seed: int, steps: int, overrides=()) -> dict:
    """One training run of ``arm``: the per-step logs the gate made, and where it closed."""
    with tempfile.TemporaryDirectory() as out:
        config = load_config([RECIPE], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={out}",
                                        "trainer.disable_tqdm=true", *overrides, *ARMS[arm]])
        trainer = build_trainer(config)
        trainer.train()
        logs = [log for log in trainer.state.log_history if "antisd/gate_open" in log]
        gate = trainer.plugins.plugins["antisd"].gate
    rewards = [log["rewards/exact_match/mean"] for log in logs]
    return {
        "entropy": [log.get("antisd/teacher_entropy") for log in logs],
        "smoothed": [log.get("antisd/teacher_entropy_smoothed") for log in logs],
        "term": [log.get("antisd/bonus_mean", log.get("loss/antisd")) for log in logs],
        "closed_at": gate.closed_at,
        "limit": gate.limit,
        "late_reward": sum(rewards[-max(1, len(rewards) // 3):]) / max(1, len(rewards) // 3),
    }


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=30, methods=list(ARMS)).parse_args()
    results = compare(args, args.methods, lambda arm, seed, folder: run(arm, seed, args.steps, args.overrides),
                      figures=("closed_at", "late_reward"))
    for arm, runs in results.items():
        means = []
        for step in range(args.steps):
            seen = [r["entropy"][step] for r in runs if step < len(r["entropy"]) and r["entropy"][step] is not None]
            means.append(f"{sum(seen) / len(seen):.3f}" if seen else "-")
        print(f"{arm}_teacher_entropy_per_step: {' '.join(means)}")


if __name__ == "__main__":
    main()
