"""SQLM on the built-in posing model: the band rewards the questions the solver splits on, and self-play from one
topic prompt against plain GRPO on the labelled data.

A run of configs/recipes/sqlm-cpu.yaml (stackrl/arith-skills, label-free, no dataset question trained on). A
monitor reads the proposer's rows at every reward stage and solves each posed question `--resolve` times afresh
(answers the plugin never saw): the share of them in the band again (more than one and fewer than all of the fresh
answers agree with their majority), unanimous (too easy) and scattered (at most one answer agreeing: too hard), the fresh agreement with the majority and the fresh accuracy (the question read as
the task's problem, `stackrl.tasks.arithmetic.read_problem`) of the questions the proposer was rewarded for, and of
the others. Then held-out greedy accuracy after training, against plain GRPO on the dataset's questions with their
answers (exact_match) at equal steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/sqlm/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.answers import answer_after_phrase, group_answers
from stackrl.blocks.selfplay import band_reward, majority, posed_question
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sqlm-cpu.yaml"
GRPO = ["data.label_free=false", "rewards.exact_match=1.0"]  # plain GRPO on the dataset, its answers shown


class Proposals:
    """A run's monitor: each posed question, its reward, and its fresh agreement and accuracy."""

    def __init__(self, resolve: int):
        self.resolve = resolve
        self.trainer = None
        self.posed: list[dict] = []  # step, question, rewarded, agreement, accuracy (None: not the task's question)
        self.rows = 0

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "sqlm" or not kwargs["ctx"].training:
            return
        ctx = kwargs["ctx"]
        sqlm = self.trainer.plugins.plugins["sqlm"]
        rows = [i for i, c in enumerate(ctx.rollout.columns.get("category", [])) if c == "sqlm/propose"]
        self.rows += len(rows)
        questions = {i: posed_question(ctx.rollout.completions[i]) for i in rows}
        asked = [i for i in rows if questions[i]]
        fresh = ctx.generate([sqlm.prompts(questions[i]) for i in asked for _ in range(self.resolve)],
                             max_new_tokens=64)
        for n, i in enumerate(asked):
            answers = [answer_after_phrase(g.text) for g in fresh[n * self.resolve:(n + 1) * self.resolve]]
            problem = read_problem(questions[i])
            truth = None if problem is None else str(problem["answer"])
            vote = majority(group_answers(answers, math_verify=False))
            self.posed.append({
                "step": ctx.step, "question": questions[i], "rewarded": float(result[i]) == 1.0,
                "agreement": vote.agreement, "band": band_reward(vote.votes, self.resolve),
                "accuracy": None if truth is None else sum(a == truth for a in answers) / self.resolve,
            })

    def figures(self) -> dict[str, float]:
        def mean(values):
            values = [v for v in values if v is not None]
            return sum(values) / len(values) if values else float("nan")

        rewarded = [p for p in self.posed if p["rewarded"]]
        others = [p for p in self.posed if not p["rewarded"]]
        half = max(p["step"] for p in self.posed) / 2 if self.posed else 0
        return {
            "in_band": len(rewarded) / self.rows if self.rows else float("nan"),
            "in_band_late": mean([p["rewarded"] for p in self.posed if p["step"] > half]),
            "task_questions": mean([p["accuracy"] is not None for p in self.posed]),
            "rewarded_band": mean([p["band"] for p in rewarded]),
            "other_band": mean([p["band"] for p in others]),
            "rewarded_unanimous": mean([p["agreement"] == 1.0 for p in rewarded]),
            "other_unanimous": mean([p["agreement"] == 1.0 for p in others]),
            "rewarded_scattered": mean([p["band"] == 0.0 and p["agreement"] < 1.0 for p in rewarded]),
            "other_scattered": mean([p["band"] == 0.0 and p["agreement"] < 1.0 for p in others]),
            "rewarded_agreement": mean([p["agreement"] for p in rewarded]),
            "other_agreement": mean([p["agreement"] for p in others]),
            "rewarded_accuracy": mean([p["accuracy"] for p in rewarded]),
            "other_accuracy": mean([p["accuracy"] for p in others]),
        }


def run(seed: int = 0, steps: int = 30, method: str = "sqlm", overrides=(), resolve: int = 8,
        heldout: int = 0) -> tuple[dict, Proposals]:
    """Train ``method`` (``sqlm``: the recipe; ``grpo``: the recipe's data and trainer as plain GRPO with the
    answers) for ``steps`` steps: its figures (the monitor's, for sqlm; held-out greedy accuracy on ``heldout``
    problems where given) and the monitor."""
    proposals = Proposals(resolve)
    with tempfile.TemporaryDirectory() as out:
        settings = list(overrides) if method == "sqlm" else [*GRPO, *(o for o in overrides if not o.startswith("sqlm."))]
        config = recipe_config(RECIPE, plugins=method == "sqlm", seed=seed, steps=steps, output_dir=out,
                               overrides=settings)
        trainer = build_trainer(config, monitor=proposals if method == "sqlm" else None)
        proposals.trainer = trainer
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
    return ({**figures, **proposals.figures()} if method == "sqlm" else figures), proposals


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=30, eval_size=128, methods=("sqlm", "grpo"))
    parser.add_argument("--resolve", type=int, default=8, help="fresh answers to each posed question")
    args = parser.parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.resolve, args.eval_size)[0],
            figures=("accuracy", "in_band", "in_band_late", "task_questions", "rewarded_band", "other_band",
                     "rewarded_unanimous", "other_unanimous", "rewarded_scattered", "other_scattered", "rewarded_agreement", "other_agreement",
                     "rewarded_accuracy", "other_accuracy"))


if __name__ == "__main__":
    main()
