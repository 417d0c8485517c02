"""AERO on the built-in posing model: the questions kept for the solver, their rewards and pseudo-labels, checked
by hand against the answers the plugin sampled, and self-play against plain GRPO on the labelled data.

A run of configs/recipes/aero-cpu.yaml (stackrl/arith-skills, label-free, no dataset question trained on). Every
`ctx.generate` call the plugin makes is recorded (below the plugin, at the policy), and at each training reward
stage a monitor redoes AERO's rules by hand from those generations: each posed question's normalised answer
entropy (-sum p log2 p / log2 n over the answered samples), its zone in [low, high], the generator's reward (1 in
the ZPD), the first attempt of its two largest answer clusters and the retry prompts the corrections must have
been asked with, the label the authors' rule gives on the corrections' answers (both answered and agreeing: the
first's), and which clusters were wrong; the solver rows' rewards against their labels, and that each labelled
row was posed at least `stagger` + 1 steps before it is drawn. `mismatches` counts every disagreement between the
monitor and the plugin. Beside it, of the labelled questions that are the task's questions
(`stackrl.tasks.arithmetic.read_problem`), the share whose corrected label is right (`label_accuracy`) and whose
majority answer is (`majority_accuracy`): what the correction buys over majority voting. Then held-out greedy
accuracy after training, against plain GRPO on the dataset's questions with their answers at equal steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/aero/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from pathlib import Path


from stackrl.answers import answer_after_phrase
from stackrl.blocks.selfplay import posed_question
from stackrl.testing.benchmark import one_thread, recorded_generations
from stackrl.run import build_trainer
from stackrl.tasks import retry_prompt
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "aero-cpu.yaml"
GRPO = ["data.label_free=false", "rewards.exact_match=1.0"]  # plain GRPO on the dataset, its answers shown
RETRY_END = "\nTry again.\n"


def by_hand(answers: list, low: float, high: float):
    """The normalised entropy and zone of one question's answers, and its clusters largest first (a tie: the one
    answered first), each (answer, first row)."""
    valid = [a for a in answers if a is not None]
    counts = Counter(valid)
    entropy = -sum(c / len(valid) * math.log2(c / len(valid)) for c in counts.values()) if valid else 0.0
    h = entropy / math.log2(len(answers))
    place = "chaos" if not valid else "mastery" if h < low else "zpd" if h <= high else "chaos"
    clusters = sorted(counts, key=lambda a: (-counts[a], answers.index(a)))
    return h, place, [(a, answers.index(a)) for a in clusters]


class Monitor:
    def __init__(self):
        self.trainer = None
        self.calls: list = []
        self.posed_at: dict = {}  # a labelled row's prompt -> the step its question was posed
        self.mismatches = 0
        self.counts = Counter()
        self.labels: list = []  # (label right, majority right) of labelled task questions
        self.notes: list = []

    def miss(self, what):
        self.mismatches += 1
        if len(self.notes) < 10:
            self.notes.append(what)

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "aero" or not kwargs["ctx"].training:
            self.calls.clear()
            return
        ctx = kwargs["ctx"]
        aero = self.trainer.plugins.plugins["aero"]
        config = aero.config
        n = config.solver_samples
        rollout = ctx.rollout
        categories = rollout.columns.get("category", [None] * len(rollout))
        calls = list(self.calls)
        self.calls.clear()
        solve = [c for c in calls if not c[0] or not c[0][0].endswith(RETRY_END)]
        fixes = {p: t for prompts, texts in calls if prompts and prompts[0].endswith(RETRY_END)
                 for p, t in zip(prompts, texts)}
        texts = solve[0][1] if solve else []

        # The solver's rows: 1 for reaching their label, drawn stagger + 1 steps or more after it was posed.
        labels = rollout.columns.get("aero_label", [None] * len(rollout))
        for i, label in enumerate(labels):
            if categories[i] == "aero/propose" or label is None:
                continue
            self.counts["solver_rows"] += 1
            if result[i] != float(answer_after_phrase(rollout.completions[i]) == label):
                self.miss(("solver reward", i))
            posed = self.posed_at.get(rollout.prompts[i])
            if posed is None or ctx.step - posed < config.stagger + 1:
                self.miss(("drawn too early", ctx.step, posed))

        # The generator's rows, in order: their questions answered n times each in one call.
        expected = []
        k = 0
        for i, c in enumerate(categories):
            if c != "aero/propose":
                continue
            question = posed_question(rollout.completions[i])
            if question is None:
                continue
            answers = [answer_after_phrase(t) for t in texts[k * n:(k + 1) * n]]
            group = texts[k * n:(k + 1) * n]
            k += 1
            h, place, clusters = by_hand(answers, config.low, config.high)
            self.counts["questions"] += 1
            self.counts[place] += 1
            if result[i] != float(place == "zpd"):
                self.miss(("generator reward", question, h, result[i]))
            if place != "zpd" or len(clusters) < 2:
                continue
            self.counts["corrected"] += 1
            prompt = aero.prompts(question)
            attempts = [group[row] for _, row in clusters[:2]]
            asked = [retry_prompt(prompt, a) for a in attempts]
            if not all(p in fixes for p in asked):
                self.miss(("no correction", question))
                continue
            fixed = [answer_after_phrase(fixes[p]) for p in asked]
            if fixed[0] is None or fixed[1] != fixed[0]:
                continue
            self.counts["converged"] += 1
            label = fixed[0]
            wrong = [a for (answer, _), a in zip(clusters[:2], attempts) if answer != label]
            expected.append({"question": question, "label": label, "wrong": wrong})
            problem = read_problem(question)
            if problem is not None:
                truth = str(problem["answer"])
                self.labels.append((label == truth, clusters[0][0] == truth))
        if aero.pending != expected:
            self.miss(("kept", aero.pending, expected))
        for item in expected:  # the prompts of the rows it becomes: the question, and a retry of each wrong attempt
            prompt = aero.prompts(item["question"])
            for row in [prompt, *(retry_prompt(prompt, a) for a in item["wrong"] if config.refiner)]:
                self.posed_at.setdefault(row, ctx.step)

    def figures(self) -> dict:
        counts = self.counts
        q = counts["questions"] or float("nan")
        labelled = len(self.labels) or float("nan")
        return {
            "mismatches": float(self.mismatches),
            "questions": float(counts["questions"]),
            "zpd": counts["zpd"] / q, "mastery": counts["mastery"] / q, "chaos": counts["chaos"] / q,
            "converged": counts["converged"] / (counts["corrected"] or float("nan")),
            "solver_rows": float(counts["solver_rows"]),
            "label_accuracy": sum(a for a, _ in self.labels) / labelled,
            "majority_accuracy": sum(b for _, b in self.labels) / labelled,
        }


def run(seed: int = 0, steps: int = 20, method: str = "aero", overrides=(), heldout: int = 0) -> tuple[dict, Monitor]:
    """Train ``method`` (``aero``: the recipe; ``grpo``: the recipe's data and trainer as plain GRPO with the
    answers) for ``steps`` steps: its figures (the monitor's, for aero; held-out greedy accuracy on ``heldout``
    problems where given) and the monitor."""
    monitor = Monitor()
    with tempfile.TemporaryDirectory() as out, recorded_generations(monitor.calls, "aero"), one_thread():
        settings = list(overrides) if method == "aero" else [*GRPO, *(o for o in overrides if not o.startswith("aero."))]
        config = recipe_config(RECIPE, plugins=method == "aero", seed=seed, steps=steps, output_dir=out,
                               overrides=settings)
        trainer = build_trainer(config, monitor=monitor if method == "aero" else None)
        monitor.trainer = trainer
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
    return ({**figures, **monitor.figures()} if method == "aero" else figures), monitor


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=20, eval_size=128, methods=("aero", "grpo"))
    args = parser.parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.eval_size)[0],
            figures=("accuracy", "mismatches", "questions", "zpd", "mastery", "chaos", "converged", "solver_rows",
                     "label_accuracy", "majority_accuracy"))


if __name__ == "__main__":
    main()
