"""Reflect, Retry, Reward's mechanism on the built-in task: retries after a reflection succeed more often.

Trains the CPU recipe (configs/recipes/rrr-cpu.yaml, stackrl/arith-skills) and the same run at learning rate 0
(the untrained policy on the same prompts and draws), for the same steps and seeds, and prints the mean over the
last half of the steps of ``rrr/retry_success``: the share of retries, after a reflection on a failed first
attempt, that reach the right answer.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rrr/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import yaml

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rrr-cpu.yaml"
METHODS = ("untrained", "rrr")


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    from stackrl.config import load_config

    tree = yaml.safe_load(RECIPE.read_text())
    if method == "untrained":
        tree["trainer"]["learning_rate"] = 0.0
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def run(method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run; the mean retry success over its last half of steps, and over all of them."""
    from stackrl.testing.fixtures import train_steps

    trainer = train_steps(load(method, seed, steps, folder, overrides))
    values = [log["rrr/retry_success"] for log in trainer.state.log_history if "rrr/retry_success" in log]
    assert len(values) == steps, f"expected one rrr/retry_success per step, got {len(values)}"
    late = values[steps // 2 :]
    return {"late": sum(late) / len(late), "all": sum(values) / len(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the recipe, for every run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {method: [] for method in METHODS}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for method in METHODS:
                figures = run(method, seed, args.steps, Path(tmp), args.overrides)
                results[method].append(figures)
                print(f"seed {seed} {method:>9}: retry success, late steps {figures['late']:.3f}, all {figures['all']:.3f}", flush=True)
    print(f"\n{args.steps} steps, seeds {args.seeds}, overrides {args.overrides}")
    for method, rows in results.items():
        late = sum(r["late"] for r in rows) / len(rows)
        print(f"{method:>9}: retry success over the last half of the steps {late:.3f}")


if __name__ == "__main__":
    main()
