"""EEPO's mechanism on the built-in task: groups whose second half is sampled after unlearning the first half hold
more distinct answers, and more of them have a reward spread (some right, some wrong), than plain GRPO's groups.

Trains the CPU recipe (configs/recipes/eepo-cpu.yaml) and the same recipe without the plugin for the same steps
and seeds, and prints, averaged over every training rollout, the distinct final answers per group of 8 and the
share of groups with a reward spread, with the rollouts' accuracy.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/eepo/benchmarks/mechanism.py --seeds 0 1 2 --steps 6
"""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "eepo-cpu.yaml"


def rollout_figures(rollout) -> dict[str, float]:
    """Mean distinct final answers per group, share of groups with a reward spread, and accuracy of a rollout."""
    from stackrl.answers import extract_answer

    size, rewards = rollout.group_size, rollout.rewards["exact_match"]
    groups = range(rollout.num_groups)
    distinct = [len({extract_answer(t) for t in rollout.completions[g * size : (g + 1) * size]}) for g in groups]
    spread = [float(rewards[g * size : (g + 1) * size].std() > 0) for g in groups]
    return {"distinct": sum(distinct) / len(distinct), "spread": sum(spread) / len(spread),
            "accuracy": float(rewards.mean())}


class _Watch(TrainerCallback):
    """Takes each training rollout's figures at the end of its step."""

    def __init__(self):
        self.trainer, self.per_step = None, []

    def on_step_end(self, args, state, control, **kwargs):
        self.per_step.append(rollout_figures(self.trainer._rollouts["train"]))


def run(method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict[str, float]:
    """Train ``steps`` steps of the recipe (``method`` eepo) or of plain GRPO; the rollouts' mean figures."""
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config

    config = recipe_config(RECIPE, plugins=method == "eepo", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)
    watch = _Watch()
    watch.trainer = build_trainer(config, callbacks=[watch])
    watch.trainer.train()
    return {key: sum(s[key] for s in watch.per_step) / len(watch.per_step) for key in watch.per_step[0]}


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=6).parse_args()
    overrides = ["trainer.disable_tqdm=true", *args.overrides]
    compare(args, ("eepo", "grpo"), lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
            figures=("distinct", "spread", "accuracy"))


if __name__ == "__main__":
    main()
