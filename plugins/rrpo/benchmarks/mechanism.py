"""RRPO's mechanism on the built-in task: where a failed attempt is reset decides what its continuations learn.

Trains the CPU recipe (configs/recipes/rrpo-cpu.yaml) with every group a reset group, once per reset choice, for
the same steps and seeds, and prints for each:

- success: the share of continuations (suffixes) that reach the right answer;
- spread: the share of reset groups whose continuations' rewards differ (a group with equal rewards has zero
  advantages and teaches nothing).

Reset at the first wrong line (the oracle), a continuation redoes the step that went wrong; reset at a random line,
it often starts after the error and cannot recover, or before it and repeats the easy steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rrpo/benchmarks/mechanism.py --seeds 0 1 2 --steps 5
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import yaml

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rrpo-cpu.yaml"
RESETS = ("random", "oracle")


def load(reset: str, seed: int, steps: int, folder: Path, overrides=()):
    from stackrl.config import load_config

    tree = yaml.safe_load(RECIPE.read_text())
    tree["rrpo"].update(reset=reset, reset_share=1.0)
    tree["output_dir"] = str(folder / f"{reset}-{seed}")
    path = folder / f"{reset}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"rrpo.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def run(reset: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run; the per-step means of ``success`` and ``spread`` over its reset groups."""
    from stackrl.testing.fixtures import train_steps

    trainer = train_steps(load(reset, seed, steps, folder, overrides))
    figures = {}
    for name, key in (("success", "rrpo/suffix_success"), ("spread", "rrpo/reset_groups_with_spread")):
        values = [log[key] for log in trainer.state.log_history if key in log]
        assert len(values) == steps, f"expected one {key} per step, got {len(values)}"
        figures[name] = sum(values) / len(values)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the recipe, for every run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {reset: [] for reset in RESETS}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for reset in RESETS:
                figures = run(reset, seed, args.steps, Path(tmp), args.overrides)
                results[reset].append(figures)
                print(f"seed {seed} {reset:>6}: success {figures['success']:.3f}  spread {figures['spread']:.3f}")
    print(f"\n{args.steps} steps, seeds {args.seeds}, overrides {args.overrides}")
    print(f"{'':>6} {'success':>8} {'spread':>8}")
    for reset, rows in results.items():
        means = {key: sum(r[key] for r in rows) / len(rows) for key in ("success", "spread")}
        print(f"{reset:>6} {means['success']:>8.3f} {means['spread']:>8.3f}")


if __name__ == "__main__":
    main()
