"""CADENCE's mechanism on the built-in task: the student stackrl/arith-tiny distils from a larger teacher of its
tokenizer (configs/recipes/cadence-cpu.yaml's `aux_models: teacher`).

``run(seed, steps)``: the recipe for ``steps`` steps, with a monitor that keeps the first batch's rewards, its
advantages before and after the plugin's reshaping and the plugin's DRIFT quantities (beta, the cosine beta, the
coverage and its average): what the mechanism test checks by hand against the two models scored apart.
``main``: held-out greedy accuracy after ``--steps`` steps of the recipe and of plain GRPO (the same recipe without
the plugin, exact_match as the reward) at each seed, and of the untrained student:

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/cadence/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "cadence-cpu.yaml"
HELD_OUT = ("accuracy",)


class FirstBatch:
    """A run's monitor: the first reward and advantage calls of the plugin, with what they saw and returned."""

    def __init__(self):
        self.record: dict = {}

    def __call__(self, hook, plugin, kwargs, result):
        if plugin != "cadence" or hook in self.record or hook not in ("reward", "reshape_advantages"):
            return
        ctx = kwargs["ctx"]
        if hook == "reward":
            rollout = ctx.rollout
            self.record["reward"] = {
                "rewards": list(result), "completions": list(rollout.completions), "group_size": rollout.group_size,
                "answers": list(rollout.columns["answer"]), "lengths": [len(ids) for ids in rollout.completion_ids],
            }
        else:
            rollout = ctx.rollout
            self.record["reshape_advantages"] = {
                "step": ctx.step, "advantages": kwargs["advantages"].clone(), "reshaped": result.clone(),
                "prompt_ids": [list(ids) for ids in rollout.prompt_ids],
                "completion_ids": [list(ids) for ids in rollout.completion_ids],
            }


def run(seed: int = 0, steps: int = 1, overrides=()) -> tuple[dict, object]:
    """``(record, plugin)``: the first batch's record (:class:`FirstBatch`) after ``steps`` steps of the recipe, and
    the plugin (its ``last`` holds the last batch's DRIFT quantities). Torch on one thread."""
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import recipe_config

    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out, overrides=overrides)
        monitor = FirstBatch()
        trainer = build_trainer(config, monitor=monitor)
        trainer.train()
        return monitor.record, trainer.plugins.plugins["cadence"]


def measured(method: str, seed: int, steps: int, folder: Path, overrides=(), size: int = 200) -> dict:
    """Held-out greedy accuracy on ``size`` problems after ``steps`` steps of the recipe (``cadence``) or of plain
    GRPO (``grpo``)."""
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import greedy_accuracy, recipe_config

    if method != "cadence":
        overrides = [*(o for o in overrides if not o.startswith("cadence.")), "rewards.exact_match=1.0"]
    with one_thread():
        config = recipe_config(RECIPE, plugins=method == "cadence", seed=seed, steps=max(steps, 1),
                               output_dir=folder / "run", overrides=overrides)
        trainer = build_trainer(config)
        if steps:
            trainer.train()
        return {"accuracy": greedy_accuracy(trainer, size, seed=1000)}


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo

    against_plain_grpo(__doc__.split("\n\n")[0], "cadence", measured, HELD_OUT, steps=30, eval_size=200)


if __name__ == "__main__":
    main()
