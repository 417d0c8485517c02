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

from pathlib import Path

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
    from stackrl.run import evaluate_checkpoint
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=20, eval_size=200).parse_args()
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    compare(args, METHODS, lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
            figures=("signal", "pass@1"),
            before=lambda folder: evaluate_checkpoint(load("grpo", 0, 0, folder, overrides)))


if __name__ == "__main__":
    main()
