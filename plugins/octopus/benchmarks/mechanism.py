"""Octopus's mechanism on the built-in task: held-out self-correction against plain GRPO at equal steps.

Trains configs/recipes/octopus-cpu.yaml (stackrl/arith-skills) and the same recipe without the plugin (plain GRPO on
exact_match of a single attempt, every row sampled), for the same steps and seeds, and measures the untrained and
each trained model with ``eval.skill: repair``: the model's own sampled first attempts at held-out problems, each
retried after the built-in retry instruction (the recipe's marker). ``net`` is (wrong -> right minus right -> wrong)
over all problems, ``fix`` and ``keep`` its halves, ``first`` the first attempts' accuracy. The Octopus runs sample
half the rows plain GRPO samples.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/octopus/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "octopus-cpu.yaml"
FIGURES = ("net", "fix", "keep", "first")


def run(method: str, seed: int, steps: int, folder: Path, overrides) -> dict:
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config, self_correction

    if method == "grpo":  # the plugin's settings (octopus.stage_two_step=...) belong to the Octopus runs alone
        overrides = [*(o for o in overrides if not o.startswith("octopus.")), "rewards.exact_match=1.0"]
    config = recipe_config(RECIPE, plugins=method == "octopus", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)  # fmt: skip
    trainer = build_trainer(config)
    if steps:
        trainer.train()
    return self_correction(trainer.model, trainer.processing_class, config)


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=30, eval_size=300).parse_args()
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    compare(args, ("grpo", "octopus"), lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
            figures=FIGURES, before=lambda folder: run("octopus", 0, 0, folder, overrides), number_format="+.3f")


if __name__ == "__main__":
    main()
