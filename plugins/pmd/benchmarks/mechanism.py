"""PMD's mechanism on the built-in task: the memory of verified solutions teaches the bare-question student.

A short run of configs/recipes/pmd-cpu.yaml (pure distillation, a pool of 32 problems that recur every 4 steps).
Before and after, on the pool's problems, we measure the policy's mean per-token log-probability of each
problem's correct solution after the bare question (the approach a verified memory holds), and its greedy
accuracy there. A monitor records every group the run drew, so the memory left at the end can be checked against
the verified solutions the rollouts held. With `--methods grpo`, plain GRPO on the same pool at equal steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/pmd/benchmarks/mechanism.py --seeds 0 1 2 --steps 24 --methods pmd grpo
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.heldout import pool_figures, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "pmd-cpu.yaml"


class VerifiedVisits:
    """A run's monitor: at each of pmd's ``post_step`` calls, each group's first completion that reaches its
    answer (``exact_match`` against the data, not the plugin's reward), by prompt tokens, the latest kept."""

    def __init__(self):
        self.answers: dict[str, str] = {}  # prompt -> answer, set once the trainer has loaded the data
        self.latest: dict[tuple[int, ...], str] = {}
        self.verified_by_step: list[int] = []  # how many prompts had a verified solution after each step

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "post_step" or plugin != "pmd":
            return
        rollout = kwargs["ctx"].rollout
        for start in range(0, len(rollout), rollout.group_size):
            rows = range(start, start + rollout.group_size)
            answer = self.answers[rollout.prompts[start]]
            verified = next((rollout.completions[i] for i in rows if exact_match(rollout.completions[i], answer)), None)
            if verified is not None:
                key = tuple(rollout.prompt_ids[start])
                self.latest[key] = verified
        self.verified_by_step.append(len(self.latest))


def run(seed: int, steps: int, method: str = "pmd", overrides=()) -> tuple[dict, dict, VerifiedVisits, object]:
    """``(before, after, visits, plugin)``: the figures before and after ``steps`` steps of the recipe (``method``
    "grpo": without its plugin, the outcome reward weighted 1), what the run's groups verified, and the plugin."""
    if method != "pmd":
        overrides = [*(o for o in overrides if not o.startswith("pmd.")), "rewards.exact_match=1.0"]
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "pmd", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides)
        visits = VerifiedVisits()
        trainer = build_trainer(config, monitor=visits)
        rows = trainer.train_dataset
        prompts, answers, solutions = list(rows["prompt"]), list(rows["answer"]), list(rows["solution"])
        visits.answers = dict(zip(prompts, answers))
        before = pool_figures(trainer, prompts, solutions, answers)
        trainer.train()
        after = pool_figures(trainer, prompts, solutions, answers)
    return before, after, visits, trainer.plugins.plugins.get("pmd")


def main():
    from stackrl.testing.benchmark import arguments, changes, compare

    args = arguments(__doc__.splitlines()[0], steps=24, methods=("pmd", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: changes(*run(seed, args.steps, method, args.overrides)[:2]),
            figures=("solution_logp_before", "solution_logp", "accuracy_before", "accuracy"), number_format=".4f")


if __name__ == "__main__":
    main()
