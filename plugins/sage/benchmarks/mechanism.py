"""SAGE's mechanism on the built-in task: more groups that carry a learning signal, and no-hint accuracy kept.

Trains the CPU recipe (configs/recipes/sage-cpu.yaml: arith-tiny on the hard categories, hints cut from the
reference solution) and the same run without the plugin (plain GRPO), for the same steps and seeds, and prints
for each run:

- signal: the share of groups whose rewards are not all equal, ``1 - frac_reward_zero_std`` as TRL logs it,
  averaged over the steps (a group with equal rewards has zero advantages and teaches nothing);
- pass@1: held-out accuracy without hints after training (the recipe's eval section: the test split of the same
  categories, 4 samples a problem at temperature 1, seeded).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/sage/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
    OMP_NUM_THREADS=1 .venv/bin/python plugins/sage/benchmarks/mechanism.py trainer.learning_rate=1e-4
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sage-cpu.yaml"
METHODS = ("grpo", "sage")


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    """The recipe as ``method`` runs it: with the plugin (sage) or without (grpo), at this seed and length."""
    from stackrl.testing.heldout import recipe_config

    return recipe_config(RECIPE, plugins=method == "sage", seed=seed, steps=steps,
                         output_dir=folder / f"{method}-{seed}", overrides=overrides)


def run(method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run and measure it: ``signal`` (per-step mean share of groups with a reward spread), ``pass@1``."""
    from stackrl.evaluation import evaluate
    from stackrl.testing.fixtures import train_steps

    config = load(method, seed, steps, folder, overrides)
    trainer = train_steps(config)
    zero_std = [log["frac_reward_zero_std"] for log in trainer.state.log_history if "frac_reward_zero_std" in log]
    assert len(zero_std) == steps, f"expected one frac_reward_zero_std per step, got {len(zero_std)}"
    result = evaluate(trainer.model, trainer.processing_class, config, trainer.args.max_completion_length)
    return {"signal": 1 - sum(zero_std) / len(zero_std), "pass@1": result["pass@1"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--eval-size", type=int, default=200)
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the recipe, for both runs")
    args = parser.parse_args()
    from stackrl.run import evaluate_checkpoint

    torch.set_num_threads(1)
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    results = {method: [] for method in METHODS}
    with tempfile.TemporaryDirectory() as tmp:
        untrained = evaluate_checkpoint(load("grpo", 0, 0, Path(tmp), overrides))
        print(f"before training: pass@1 {untrained['pass@1']:.3f}", flush=True)
        for seed in args.seeds:
            for method in METHODS:
                figures = run(method, seed, args.steps, Path(tmp), overrides)
                results[method].append(figures)
                signal, accuracy = figures["signal"], figures["pass@1"]
                print(f"seed {seed} {method:>4}: signal {signal:.3f}  pass@1 {accuracy:.3f}", flush=True)
    print(f"\n{args.steps} steps, seeds {args.seeds}, held-out problems {args.eval_size}, overrides {args.overrides}")
    print(f"{'':>6} {'signal':>8} {'pass@1':>8}")
    for method, rows in results.items():
        means = {key: sum(r[key] for r in rows) / len(rows) for key in ("signal", "pass@1")}
        print(f"{method:>6} {means['signal']:>8.3f} {means['pass@1']:>8.3f}")


if __name__ == "__main__":
    main()
