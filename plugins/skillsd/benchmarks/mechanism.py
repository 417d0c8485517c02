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

from pathlib import Path

from stackrl.testing.benchmark import trained_solution_figures

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
    before, after, trainer, answers = trained_solution_figures(RECIPE, plugins=method == "skillsd", seed=seed,
                                                               steps=steps, overrides=overrides)
    return before, after, trainer.plugins.plugins.get("skillsd"), answers


def main():
    from stackrl.testing.benchmark import arguments, changes, compare

    args = arguments(__doc__.splitlines()[0], steps=24, methods=("skillsd", "skillsd_distill", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: changes(*run(seed, args.steps, method, args.overrides)[:2]),
            figures=("solution_logp_before", "solution_logp", "accuracy_before", "accuracy"), number_format=".4f")


if __name__ == "__main__":
    main()
