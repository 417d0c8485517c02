"""SCoRe's mechanism on the built-in task: held-out self-correction rises against plain GRPO.

Trains configs/recipes/score-cpu.yaml (stackrl/arith-skills) and the same recipe without the plugin (plain GRPO on
exact_match of a single attempt), for the same steps and seeds, and measures the untrained and each trained model
with ``eval.skill: repair``: the model's own sampled first attempts at held-out problems, each retried after the
built-in retry instruction. ``net`` is (wrong -> right minus right -> wrong) over all problems, the quantity SCoRe
raises; ``fix`` and ``keep`` are its two halves.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/score/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "score-cpu.yaml"
FIGURES = ("net", "fix", "keep", "first")


def run(method: str, seed: int, steps: int, folder: Path, overrides) -> dict:
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config, self_correction

    if method == "grpo":  # the plugin's settings (score.stage_two_step=...) belong to the SCoRe runs alone
        overrides = [*(o for o in overrides if not o.startswith("score.")), "rewards.exact_match=1.0"]
    config = recipe_config(RECIPE, plugins=method == "score", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)  # fmt: skip
    trainer = build_trainer(config)
    if steps:
        trainer.train()
    return self_correction(trainer.model, trainer.processing_class, config)


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=30, eval_size=300).parse_args()
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    compare(args, ("grpo", "score"), lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
            figures=FIGURES, before=lambda folder: run("score", 0, 0, folder, overrides), number_format="+.3f")


if __name__ == "__main__":
    main()
