"""SEIF on the built-in posing model: the Instructor's reward is the Follower's failure on its instruction, the
Filter keeps malformed instructions from the Follower, the two roles train in turn; and self-evolution from one
topic prompt against plain GRPO on the labelled data.

A run of configs/recipes/seif-cpu.yaml (stackrl/arith-skills: the Instructor poses, the Follower solves; the Judger is
the task's verifier of a posed question, `stackrl.tasks.arithmetic.read_problem`). A monitor reads every reward stage:
the role the step trains (its schedule worked out afresh), which rows carry loss, each Instructor row's instruction,
the evaluator's answers to it and its reward, which it checks against ``1 - share of answers equal to the
instruction's answer`` worked out here, and the steps and digits of the instructions that passed the Filter (their
difficulty, by turn). Then held-out greedy accuracy after training, against plain GRPO on the dataset's questions
with their answers (exact_match) at equal steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/seif/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.pool import CATEGORY_COLUMN
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "seif-cpu.yaml"
GRPO = ["data.label_free=false", "rewards.exact_match=1.0"]  # plain GRPO on the dataset, its answers shown
PROPOSE, SOLVE = "seif/propose", "seif/solve"


def expected_role(step: int, instructor: int, follower: int, first: int) -> str:
    """The role that trains the step of index ``step``, worked out from the schedule's settings."""
    if step < instructor + first:
        return "instructor" if step < instructor else "follower"
    return "instructor" if (step - instructor - first) % (instructor + follower) < instructor else "follower"


def steps_of(question: str) -> float:
    """The number of operations of a question the Filter passed (NaN for one that is not the task's)."""
    problem = read_problem(question)
    return float("nan") if problem is None else len(problem["solution"].splitlines()) - 1


class Stages:
    """A run's monitor: at each training reward stage, the rows by role, which stayed out of the loss, and each
    Instructor row's instruction, the Filter's verdict, the evaluator's answers and the reward."""

    def __init__(self):
        self.trainer = None
        self.calls: list[dict] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "seif" or not kwargs["ctx"].training:
            return
        ctx = kwargs["ctx"]
        seif = self.trainer.plugins.plugins["seif"]
        categories = ctx.rollout.columns.get(CATEGORY_COLUMN, [None] * len(ctx.rollout))
        self.calls.append({
            "step": ctx.step,
            "instructor_rows": [i for i, c in enumerate(categories) if c == PROPOSE],
            "follower_rows": [i for i, c in enumerate(categories) if c == SOLVE],
            "excluded": set(ctx.rollout.excluded),
            "questions": [" ".join(str(q).split()) for q in ctx.rollout.columns.get(seif.config.problem_column,
                                                                                  [""] * len(ctx.rollout))],
            "rewards": list(result),
            "rated": [{"row": r.row, "question": r.question, "rejected": r.rejected, "answers": list(r.answers)}
                      for r in seif.rated],
        })

    def instructions(self) -> list[dict]:
        """Every Instructor row of the run, with its step and reward."""
        return [{**r, "step": c["step"], "reward": c["rewards"][r["row"]]} for c in self.calls for r in c["rated"]]

    def figures(self, instructor: int, follower: int, first: int) -> dict[str, float]:
        def mean(values):
            values = [v for v in values if v is not None]
            return sum(values) / len(values) if values else float("nan")

        rated = self.instructions()
        passed = [r for r in rated if r["rejected"] is None]
        # The reward worked out here: 1 - the share of the evaluator's answers equal to the instruction's answer.
        failure = [float("nan") if read_problem(r["question"]) is None else
                   1.0 - mean(a == str(read_problem(r["question"])["answer"]) for a in r["answers"]) for r in passed]
        in_role = []
        for c in self.calls:
            role = expected_role(c["step"], instructor, follower, first)
            training = c["instructor_rows"] if role == "instructor" else c["follower_rows"]
            resting = c["follower_rows"] if role == "instructor" else c["instructor_rows"]
            in_role.append(not (set(training) & c["excluded"]) and set(resting) <= c["excluded"])
        follower_rows = [(c["step"], c["rewards"][i]) for c in self.calls for i in c["follower_rows"]
                         if expected_role(c["step"], instructor, follower, first) == "follower"]
        # The Follower's own accuracy, in its stages, on the instructions the Instructor was rewarded more (> 0.5) and
        # less for: a reward that follows the Follower's failure rates the hard ones higher.
        reward_of = {" ".join(r["question"].split()): r["reward"] for r in passed}
        followed = [(reward_of.get(c["questions"][i]), c["rewards"][i]) for c in self.calls for i in c["follower_rows"]
                    if expected_role(c["step"], instructor, follower, first) == "follower"]
        half = max((c["step"] for c in self.calls), default=0) / 2
        return {
            "passed": mean(r["rejected"] is None for r in rated),
            "failure": mean(failure),
            "reward_is_failure": mean(abs(r["reward"] - f) < 1e-9 for r, f in zip(passed, failure)),
            "filtered_reward_0": mean(r["reward"] == 0.0 for r in rated if r["rejected"] is not None),
            "passed_parse": mean(read_problem(r["question"]) is not None for r in passed),
            "rows_in_role": mean(in_role),
            "steps_early": mean(steps_of(r["question"]) for r in passed if r["step"] <= half),
            "steps_late": mean(steps_of(r["question"]) for r in passed if r["step"] > half),
            "follower_accuracy": mean(reward for _, reward in follower_rows),
            "followed_hard": mean(right for reward, right in followed if reward is not None and reward > 0.5),
            "followed_easy": mean(right for reward, right in followed if reward is not None and reward <= 0.5),
        }


def run(seed: int = 0, steps: int = 30, method: str = "seif", overrides=(), heldout: int = 0) -> tuple[dict, Stages]:
    """Train ``method`` (``seif``: the recipe; ``grpo``: the recipe's data and trainer as plain GRPO with the answers)
    for ``steps`` steps: its figures (the monitor's, for seif; held-out greedy accuracy on ``heldout`` problems where
    given) and the monitor."""
    stages = Stages()
    with tempfile.TemporaryDirectory() as out:
        settings = list(overrides) if method == "seif" else [*GRPO, *(o for o in overrides if not o.startswith("seif."))]
        config = recipe_config(RECIPE, plugins=method == "seif", seed=seed, steps=steps, output_dir=out,
                               overrides=settings)
        trainer = build_trainer(config, monitor=stages if method == "seif" else None)
        stages.trainer = trainer
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
        if method == "seif":
            schedule = trainer.plugins.plugins["seif"].schedule
            figures.update(stages.figures(schedule.instructor_steps, schedule.follower_steps,
                                          schedule.first_follower_steps))
    return figures, stages


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=30, eval_size=128, methods=("seif", "grpo"))
    args = parser.parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.eval_size)[0],
            figures=("accuracy", "passed", "failure", "reward_is_failure", "rows_in_role", "steps_early",
                     "steps_late", "follower_accuracy", "followed_hard", "followed_easy"))


if __name__ == "__main__":
    main()
