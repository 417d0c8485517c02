"""Skill-SD's mechanism on the built-in task: skills of earlier successes, shown only to the synced teacher, teach
the plain-prompt student.

A short run of configs/recipes/skillsd-cpu.yaml (a pool of 32 problems that recur every 4 steps). Before and after,
on the pool's problems, we measure the policy's mean per-token log-probability of each problem's correct solution
after the bare question (what a stored success holds), and its greedy accuracy there. `distill_only` sets the
outcome reward's weight to 0 (it still tells the successes), so that the distillation term alone moves the policy:
the mechanism test runs that way, and `--methods skillsd_distill` is that run. With `--methods grpo`, plain GRPO on
the same pool at equal steps.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/skillsd/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import recipe_config, solution_figures

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "skillsd-cpu.yaml"


def run(seed: int, steps: int, method: str = "skillsd", overrides=(), distill_only: bool = False):
    """``(before, after, plugin, answers)``: the figures before and after ``steps`` steps of the recipe (``method``
    "skillsd_distill": with ``distill_only``; "grpo": without its plugin), the plugin (``None`` for grpo) and the
    pool's answer to each prompt."""
    overrides = list(overrides)
    if method == "skillsd_distill":
        method, distill_only = "skillsd", True
    if method != "skillsd":
        overrides = [o for o in overrides if not o.startswith("skillsd.")]
    elif distill_only:
        overrides.append("rewards.exact_match=0.0")
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "skillsd", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides)
        trainer = build_trainer(config)
        rows = trainer.train_dataset
        prompts, answers, solutions = list(rows["prompt"]), list(rows["answer"]), list(rows["solution"])
        before = solution_figures(trainer, prompts, solutions, answers)
        trainer.train()
        after = solution_figures(trainer, prompts, solutions, answers)
    return before, after, trainer.plugins.plugins.get("skillsd"), dict(zip(prompts, answers))


def main():
    from stackrl.testing.benchmark import arguments, changes, compare

    args = arguments(__doc__.splitlines()[0], steps=24, methods=("skillsd", "skillsd_distill", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: changes(*run(seed, args.steps, method, args.overrides)[:2]),
            figures=("solution_logp_before", "solution_logp", "accuracy_before", "accuracy"), number_format=".4f")


if __name__ == "__main__":
    main()
