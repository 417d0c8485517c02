"""AntiSD's gate on the built-in task: the teacher's entropy step by step under AntiSD and under plain GRPO, and
the step the gate closes at.

Three arms of configs/recipes/antisd-cpu.yaml, several seeds: "antisd" (the recipe, with any overrides given on
the command line), "ungated" (the same term with a gate that never closes) and "grpo" (the term weighted 0 and a
gate that never closes: it only watches the teacher's entropy). Prints, per seed and arm, the step the gate
closed at and the training reward over the last third of the run, then the mean teacher entropy per step of each
arm.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/antisd/benchmarks/mechanism.py --seeds 3 --steps 30
    OMP_NUM_THREADS=1 .venv/bin/python plugins/antisd/benchmarks/mechanism.py antisd.gate_relative=false \\
        antisd.gate_threshold=0.04
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from stackrl.config import load_config
from stackrl.run import build_trainer

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "antisd-cpu.yaml"
ARMS = {
    "antisd": [],
    "ungated": ["antisd.gate_threshold=0.0"],
    "grpo": ["losses.antisd=0.0", "antisd.gate_threshold=0.0"],
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
        "term": [log.get("loss/antisd") for log in logs],
        "closed_at": gate.closed_at,
        "limit": gate.limit,
        "late_reward": sum(rewards[-max(1, len(rewards) // 3):]) / max(1, len(rewards) // 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("overrides", nargs="*", help="config overrides of the antisd arm, key=value")
    args = parser.parse_args()
    torch.set_num_threads(1)
    curves = {arm: [] for arm in args.arms}
    for seed in range(args.seeds):
        for arm in args.arms:
            result = run(arm, seed, args.steps, args.overrides if arm == "antisd" else ())
            curves[arm].append(result["entropy"])
            print(f"seed {seed} {arm}: gate closed at step {result['closed_at']}   "
                  f"reward over the last third {result['late_reward']:.3f}", flush=True)
    for arm, runs in curves.items():
        means = []
        for step in range(args.steps):
            seen = [r[step] for r in runs if step < len(r) and r[step] is not None]
            means.append(f"{sum(seen) / len(seen):.3f}" if seen else "-")
        print(f"{arm}_teacher_entropy_per_step: {' '.join(means)}")


if __name__ == "__main__":
    main()
