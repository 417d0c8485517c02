"""SEC's mechanism on the built-in task: the curriculum drifts to the categories of intermediate difficulty.

Trains the CPU recipe (configs/recipes/sec-cpu.yaml: arith-tiny on all six categories, SEC at alpha 0.5 and
tau 0.4) and the same run without the plugin (uniform sampling: TRL's sampler), for the same steps and seeds, and
prints for each run:

- per category, easiest first: the untrained model's held-out pass@1, SEC's draw probability after the last
  step (``sec/prob/<category>``) and the share of problems each run drew from it (counted from each training
  rollout: the pool keeps no counts in a run without plugins);
- hardest: held-out pass@1 after training on the hardest category (its test split, 4 samples a problem at
  temperature 1, seeded), and pass@1 on all categories.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/sec/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from transformers import TrainerCallback

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sec-cpu.yaml"
METHODS = ("uniform", "sec")
HARDEST = "4 steps, 2-digit"


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    """The recipe as ``method`` runs it: with the plugin (sec) or without (uniform), at this seed and length."""
    from stackrl.testing.heldout import recipe_config

    return recipe_config(RECIPE, plugins=method == "sec", seed=seed, steps=steps,
                         output_dir=folder / f"{method}-{seed}", overrides=overrides)


class DrawnCategories(TrainerCallback):
    """Counts the category of each problem the run trained on, one per group of each training rollout."""

    def __init__(self):
        self.trainer, self.drawn, self._counted = None, Counter(), None

    def on_step_end(self, args, state, control, **kwargs):
        rollout = self.trainer._rollouts["train"]
        if rollout is self._counted:  # a rollout that serves several optimizer steps was drawn once
            return
        self._counted = rollout
        self.drawn.update(rollout.columns["category"][:: rollout.group_size])


def run(method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run and measure it: ``drawn`` (share of problems per category), ``prob`` (SEC's last draw
    probabilities; none for uniform), ``hardest`` and ``all`` (held-out pass@1 after training)."""
    from stackrl.evaluation import evaluate
    from stackrl.run import build_trainer

    config = load(method, seed, steps, folder, overrides)
    counter = DrawnCategories()
    trainer = counter.trainer = build_trainer(config, callbacks=[counter])
    trainer.train()
    drawn, total = counter.drawn, counter.drawn.total()
    logged = [log for log in trainer.state.log_history if any(k.startswith("sec/prob/") for k in log)]
    prob = {k[len("sec/prob/") :]: v for k, v in logged[-1].items() if k.startswith("sec/prob/")} if logged else {}
    length = trainer.args.max_completion_length
    hardest = load(method, seed, steps, folder, [*overrides, f'data.options.categories=["{HARDEST}"]'])
    return {
        "drawn": {category: count / total for category, count in drawn.items()},
        "prob": prob,
        "hardest": evaluate(trainer.model, trainer.processing_class, hardest, length)["pass@1"],
        "all": evaluate(trainer.model, trainer.processing_class, config, length)["pass@1"],
    }


def main() -> None:
    from stackrl.run import evaluate_checkpoint
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=20, eval_size=200).parse_args()
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    untrained = {}

    def before(folder: Path) -> dict:
        result = evaluate_checkpoint(load("uniform", 0, 0, folder, overrides))
        untrained.update(result["by_category"])
        return {"hardest": untrained.get(HARDEST), "all": result["pass@1"]}

    results = compare(args, METHODS, lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
                      figures=("hardest", "all"), before=before)
    print(f"\n{'category':<18} {'pass@1 before':>13} {'SEC prob':>9} {'SEC drawn':>10} {'uniform drawn':>14}")

    def mean(method, key, category):
        return sum(r[key].get(category, 0.0) for r in results[method]) / len(results[method])

    for category in untrained:
        print(
            f"{category:<18} {untrained[category]:>13.3f} {mean('sec', 'prob', category):>9.3f} "
            f"{mean('sec', 'drawn', category):>10.3f} {mean('uniform', 'drawn', category):>14.3f}"
        )


if __name__ == "__main__":
    main()
