"""TriPlay-RL on the built-in posing-and-judging model: each role's reward follows its partner's outcome, and the
three-role loop against plain GRPO on the labelled data.

A run of configs/recipes/triplay-cpu.yaml (stackrl/arith-skills, label-free). A monitor reads every reward stage:
- attacker rows: each task question posed is solved `--resolve` times afresh (replies the plugin never saw) and the
  share of wrong or missing answers by the task's verifier is the defender's failure on it; figures: the
  correlation of the attacker's reward with that failure over the run (`attack_vs_failure`), and the mean reward
  of the questions the defender failed at least half the time afresh and of the others;
- defender rows: the mean reward of replies right by the verifier and of the wrong ones (the evaluator's grade);
- evaluator rows: the share whose reward is exactly the agreement of their verdict with the verifier's label
  (`evaluator_scored`), and that agreement early and late in the run.
Then held-out greedy accuracy after training, against plain GRPO on the dataset's questions with their answers
(exact_match) at equal steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/triplay/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path


from stackrl.answers import answer_after_phrase
from stackrl.blocks.selfplay import posed_question
from stackrl.pool import CATEGORY_COLUMN
from stackrl.run import build_trainer
from stackrl.tasks import parse_verdict
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "triplay-cpu.yaml"
GRPO = ["data.label_free=false", "rewards.exact_match=1.0"]  # plain GRPO on the dataset, its answers shown
ATTACK, DEFEND, EVALUATE = "triplay/attack", "triplay/defend", "triplay/evaluate"


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else float("nan")


def correlation(xs: list[float], ys: list[float]) -> float:
    """Pearson's correlation of two lists (nan when either is constant or they are shorter than 3)."""
    if len(xs) < 3:
        return float("nan")
    mx, my = _mean(xs), _mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


class Roles:
    """A run's monitor: each scored row of each role, its reward and the verifier's view of it."""

    def __init__(self, resolve: int):
        self.resolve = resolve
        self.trainer = None
        self.attacks: list[dict] = []  # step, question, reward, failure (fresh, by the verifier)
        self.defences: list[dict] = []  # step, reward, right (by the verifier)
        self.checks: list[dict] = []  # step, reward, agrees (verdict == label)

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "triplay" or not kwargs["ctx"].training:
            return
        ctx = kwargs["ctx"]
        rollout, triplay = ctx.rollout, self.trainer.plugins.plugins["triplay"]
        roles = rollout.columns.get(CATEGORY_COLUMN, [None] * len(rollout))
        questions = {i: posed_question(rollout.completions[i]) for i, r in enumerate(roles) if r == ATTACK}
        problems = {i: read_problem(q) for i, q in questions.items() if q and read_problem(q)}
        asked = list(problems)
        fresh = ctx.generate([triplay.prompts(questions[i]) for i in asked for _ in range(self.resolve)],
                             max_new_tokens=64) if asked else []
        for n, i in enumerate(asked):
            answers = [answer_after_phrase(g.text) for g in fresh[n * self.resolve:(n + 1) * self.resolve]]
            failure = sum(a != problems[i]["answer"] for a in answers) / self.resolve
            self.attacks.append({"step": ctx.step, "question": questions[i], "reward": result[i], "failure": failure})
        truths = rollout.columns.get("triplay_answer", [None] * len(rollout))
        labels = rollout.columns.get("triplay_right", [None] * len(rollout))
        for i, role in enumerate(roles):
            if role == DEFEND:
                answer = answer_after_phrase(rollout.completions[i])
                self.defences.append({"step": ctx.step, "reward": result[i],
                                      "right": answer is not None and answer == truths[i]})
            elif role == EVALUATE:
                verdict = parse_verdict(rollout.completions[i])
                self.checks.append({"step": ctx.step, "reward": result[i],
                                    "agrees": verdict is not None and verdict == bool(labels[i])})

    def figures(self) -> dict[str, float]:
        scored = [a for a in self.attacks if a["reward"] is not None]
        half = max([r["step"] for r in self.attacks + self.defences + self.checks] or [0]) / 2
        return {
            "attack_vs_failure": correlation([a["reward"] for a in scored], [a["failure"] for a in scored]),
            "failed_reward": _mean([a["reward"] for a in scored if a["failure"] >= 0.5]),
            "held_reward": _mean([a["reward"] for a in scored if a["failure"] < 0.5]),
            "attacks": float(len(scored)),
            "failure_early": _mean([a["failure"] for a in scored if a["step"] <= half]),
            "failure_late": _mean([a["failure"] for a in scored if a["step"] > half]),
            "right_reward": _mean([d["reward"] for d in self.defences if d["right"]]),
            "wrong_reward": _mean([d["reward"] for d in self.defences if not d["right"]]),
            "evaluator_scored": _mean([c["reward"] == float(c["agrees"]) for c in self.checks]),
            "agreement_early": _mean([c["agrees"] for c in self.checks if c["step"] <= half]),
            "agreement_late": _mean([c["agrees"] for c in self.checks if c["step"] > half]),
        }


def run(seed: int = 0, steps: int = 12, method: str = "triplay", overrides=(), resolve: int = 4,
        heldout: int = 0) -> tuple[dict, Roles]:
    """Train ``method`` (``triplay``: the recipe; ``grpo``: the recipe's data and trainer as plain GRPO with the
    answers) for ``steps`` steps: its figures (the monitor's, for triplay; held-out greedy accuracy on ``heldout``
    problems where given) and the monitor."""
    roles = Roles(resolve)
    with one_thread(), tempfile.TemporaryDirectory() as out:
        ours = method == "triplay"
        settings = list(overrides) if ours else [*GRPO, *(o for o in overrides if not o.startswith("triplay."))]
        config = recipe_config(RECIPE, plugins=ours, seed=seed, steps=steps, output_dir=out, overrides=settings)
        trainer = build_trainer(config, monitor=roles if ours else None)
        roles.trainer = trainer
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
    return ({**figures, **roles.figures()} if ours else figures), roles


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=12, eval_size=128, methods=("triplay", "grpo"))
    parser.add_argument("--resolve", type=int, default=4, help="fresh answers to each posed question")
    args = parser.parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.resolve, args.eval_size)[0],
            figures=("accuracy", "attack_vs_failure", "failed_reward", "held_reward", "attacks", "failure_early",
                     "failure_late", "right_reward", "wrong_reward", "evaluator_scored", "agreement_early",
                     "agreement_late"))


if __name__ == "__main__":
    main()
