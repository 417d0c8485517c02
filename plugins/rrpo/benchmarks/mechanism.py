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

from pathlib import Path

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
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=5).parse_args()
    compare(args, RESETS, lambda reset, seed, folder: run(reset, seed, args.steps, folder, args.overrides),
            figures=("success", "spread"))


if __name__ == "__main__":
    main()
