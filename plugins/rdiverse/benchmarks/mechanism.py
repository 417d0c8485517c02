"""R-Diverse on the built-in posing model: its challenger reward carries the memory penalty of every earlier
question, measured by skill; and self-play with it, without it (R-Zero's uncertainty alone) and plain GRPO.

A run of configs/recipes/rdiverse-cpu.yaml (stackrl/arith-skills, label-free). A monitor reads the challenger's rows
at every reward stage and keeps its own memory of the questions posed before: each question's similarity to them by
skill (the operations, numbers abstracted) and by surface (its text), and what the reward leaves when that penalty
is added back (it must be R-Zero's uncertainty 1 - 2|k/m - 1/2| for some count k of m answers). Figures: the share
of posed questions whose skill repeats an earlier question's exactly, and whose text does (the surface diversity
illusion), the distinct skills among the posed questions, and held-out greedy accuracy after training against the
same run without the penalty (`rzero`) and plain GRPO on the dataset with its answers (`grpo`).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rdiverse/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.blocks.selfinstruct import rouge_l
from stackrl.blocks.selfplay import posed_question
from stackrl.run import build_trainer
from stackrl.testing.heldout import greedy_accuracy, recipe_config
from stackrl_rdiverse.memory import Skill, memory_penalty, skill_text

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rdiverse-cpu.yaml"
GRPO = ["data.label_free=false", "rewards.exact_match=1.0"]


class Challenges:
    """A run's monitor: each posed question, its reward and its similarity to the questions posed before it."""

    def __init__(self):
        self.trainer = None
        self.memory: list[str] = []
        self.posed: list[dict] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "rdiverse" or not kwargs["ctx"].training:
            return
        ctx = kwargs["ctx"]
        config = self.trainer.plugins.plugins["rdiverse"].config
        rows = [i for i, c in enumerate(ctx.rollout.columns.get("category", [])) if c == "rdiverse/propose"]
        step = []
        for i in rows:
            question = posed_question(ctx.rollout.completions[i])
            if question is None:
                continue
            skill = [rouge_l(skill_text(question), skill_text(m)) for m in self.memory]
            surface = [rouge_l(question, m) for m in self.memory]
            penalty = config.penalty_weight * memory_penalty(skill, config.max_weight, config.mean_weight)
            self.posed.append({"step": ctx.step, "question": question, "reward": float(result[i]),
                               "penalty": penalty, "left": float(result[i]) + penalty, "samples": config.solver_samples,
                               "skill_repeat": max(skill, default=0.0) == 1.0,
                               "surface_repeat": max(surface, default=0.0) == 1.0})
            step.append(question)
        self.memory.extend(step)

    def figures(self) -> dict[str, float]:
        def mean(values):
            values = list(values)
            return sum(values) / len(values) if values else float("nan")

        later = [p for p in self.posed if p["step"] > 0]
        return {
            "skill_repeats": mean(p["skill_repeat"] for p in later),
            "surface_repeats": mean(p["surface_repeat"] for p in later),
            "distinct_skills": len({skill_text(p["question"]) for p in self.posed}) / max(1, len(self.posed)),
            "penalty": mean(p["penalty"] for p in later),
            "reward": mean(p["reward"] for p in self.posed),
        }


def uncertainty_values(samples: int) -> list[float]:
    """Every value R-Zero's uncertainty takes with ``samples`` answers: 1 - 2|k/m - 1/2|, k = 0..m."""
    return [1.0 - 2.0 * abs(k / samples - 0.5) for k in range(samples + 1)]


def run(seed: int = 0, steps: int = 20, method: str = "rdiverse", overrides=(), heldout: int = 0) -> tuple[dict, Challenges]:
    """Train ``method`` (``rdiverse``: the recipe; ``rzero``: without the memory penalty; ``grpo``: the recipe's
    data and trainer as plain GRPO with the answers) for ``steps`` steps: its figures and the monitor."""
    challenges = Challenges()
    with tempfile.TemporaryDirectory() as out:
        own = [o for o in overrides if not o.startswith("rdiverse.")]
        settings = {"rdiverse": list(overrides), "rzero": [*overrides, "rdiverse.penalty_weight=0"],
                    "grpo": [*GRPO, *own]}[method]
        config = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps, output_dir=out,
                               overrides=settings)
        trainer = build_trainer(config, monitor=challenges if method != "grpo" else None)
        challenges.trainer = trainer
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
    return ({**figures, **challenges.figures()} if method != "grpo" else figures), challenges


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=20, eval_size=128, methods=("rdiverse", "rzero", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides,
                                                                  args.eval_size)[0],
            figures=("accuracy", "skill_repeats", "surface_repeats", "distinct_skills", "penalty", "reward"))


if __name__ == "__main__":
    main()
