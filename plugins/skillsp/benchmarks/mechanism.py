"""Skill-SP's skill controller on the built-in task: the skills' utilities and draw weights follow the solver's
outcomes, and the controller's routing against plain GRPO.

Trains the CPU recipe (configs/recipes/skillsp-cpu.yaml: arith-tiny, each of the task's six categories a skill)
and the same run without the plugin (plain GRPO, uniform draws) for the same steps and seeds. A monitor records,
at every step of the skillsp run, each row's skill and whether the solver solved it (the answer line read by hand,
not by the plugin's helpers) and the pool's category weights after the step, so a test can redo the controller
by hand. Figures per run:

- ``mixed``: the share of training groups whose completions were neither all solved nor all failed (the groups
  GRPO learns from; the controller routes toward the skills that give them);
- ``accuracy``: held-out greedy accuracy after training on ``--eval-size`` problems;
- ``weight_spread`` (skillsp): the largest over the smallest draw weight after the last step.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/skillsp/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from stackrl.pool import CATEGORY_COLUMN

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "skillsp-cpu.yaml"


def solved(completion: str, answer) -> bool:
    """Whether the completion's last line states the answer: the built-in model's answer line, read by hand."""
    lines = completion.strip().splitlines()
    return bool(lines) and lines[-1].strip() == f"The answer is {answer}."


class Feedback(TrainerCallback):
    """Each training rollout of a run, counted once: its rows' skills and outcomes, and the pool's category weights
    it was drawn with (read at the step's end, before the plugins' post_step sets the next ones; ``None``: uniform).
    ``final``: the weights after the last step."""

    def __init__(self):
        self.trainer = None
        self.steps: list[dict] = []
        self.groups = self.mixed = 0
        self._counted = None
        self.final = None

    def on_step_end(self, args, state, control, **kwargs):
        rollout = self.trainer._rollouts["train"]
        if rollout is self._counted:  # a rollout that serves several optimizer steps was drawn once
            return
        self._counted = rollout
        outcomes = [solved(c, a) for c, a in zip(rollout.completions, rollout.columns["answer"], strict=True)]
        size = rollout.group_size
        for g in range(0, len(outcomes), size):
            group = outcomes[g:g + size]
            self.groups += 1
            self.mixed += 0 < sum(group) < len(group)
        self.steps.append({"skills": list(rollout.columns[CATEGORY_COLUMN]), "solved": outcomes,
                           "drawn_with": self.trainer.pool.category_weights})

    def on_train_end(self, args, state, control, **kwargs):
        self.final = self.trainer.pool.category_weights


def run(method: str = "skillsp", seed: int = 0, steps: int = 20, folder: Path | None = None, overrides=(),
        eval_size: int = 0) -> tuple[dict, Feedback, object]:
    """Train ``method`` (``skillsp``: the recipe; ``grpo``: the recipe without its plugin) for ``steps`` steps on
    one torch thread: the figures, the monitor and the plugin (None for grpo)."""
    import tempfile

    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import greedy_accuracy, recipe_config

    feedback = Feedback()
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "skillsp", seed=seed, steps=steps,
                               output_dir=Path(folder or out) / f"{method}-{seed}", overrides=overrides)
        trainer = feedback.trainer = build_trainer(config, callbacks=[feedback])
        trainer.train()
        figures = {"mixed": feedback.mixed / feedback.groups if feedback.groups else float("nan")}
        if eval_size:
            figures["accuracy"] = greedy_accuracy(trainer, eval_size, seed=1000 + seed)
        skillsp = trainer.plugins.plugins.get("skillsp")
        if skillsp is not None and feedback.final:
            figures["weight_spread"] = max(feedback.final.values()) / min(feedback.final.values())
    return figures, feedback, skillsp


def main():
    from stackrl.testing.benchmark import against_plain_grpo

    against_plain_grpo(__doc__.splitlines()[0], "skillsp",
                       lambda method, seed, steps, folder, overrides, size: run(method, seed, steps, folder, overrides,
                                                                                 size)[0],
                       figures=("mixed", "accuracy", "weight_spread"), steps=20, eval_size=128)


if __name__ == "__main__":
    main()
