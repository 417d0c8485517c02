"""RLER on the built-in task: the ensemble's reward against the policy's self-vote on the same rollouts, and the bias
diagnostics of both against the hidden answers.

A short run of configs/recipes/rler-cpu.yaml (label-free; arith-tiny as the policy, arith-tiny and arith-skills as
auxiliary estimators, a snapshot of the policy). A monitor reads each of rler's reward calls: every group's votes by
estimator, the rewards it gave, and the hidden answer (the last line of the task's `solution` column, which the
label-free run keeps). On the same rows it scores the policy's self-vote alone (RLER's estimators: policy), the
self-rewarding baseline the paper starts from, and measures both rewards' rho_noise, rho_symbias and rho_selfbias
(stackrl_rler.bias). The main trains rler, the self-vote (`self`: rler.estimators=[policy], no selection) and
plain GRPO on the answers (`grpo`, RLVR) at equal steps and measures held-out greedy accuracy.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/rler/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.answers import answer_after_phrase
from stackrl.run import build_trainer
from stackrl.testing.benchmark import arguments, compare, one_thread
from stackrl.testing.heldout import greedy_accuracy, recipe_config
from stackrl_rler.bias import diagnostics
from stackrl_rler.ensemble import ensemble_reward

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rler-cpu.yaml"
METHODS = ("rler", "self", "grpo")
OVERRIDES = {"rler": [], "self": ["rler.estimators=[policy]", "rler.select=false"],
             "grpo": ["rewards.exact_match=1.0", "data.label_free=false"]}


class Votes:
    """A run's monitor: each group rler scored, with its votes, rewards and hidden answer."""

    def __init__(self):
        self.groups: list[dict] = []
        self.plugin = None  # the run's rler plugin, set once built

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "rler" or result is None or not kwargs["ctx"].training:
            return
        ctx = kwargs["ctx"]
        rollout, size = ctx.rollout, ctx.rollout.group_size
        for g, group in enumerate(self.plugin.last_votes):
            rows = slice(g * size, (g + 1) * size)
            truth = answer_after_phrase(rollout.columns["solution"][g * size].strip().splitlines()[-1])
            self.groups.append({"rows": group["rows"], "votes": group["votes"], "rewards": result[rows].tolist(),
                                "truth": truth, "excluded": [i in rollout.excluded for i in range(rows.start, rows.stop)]})

    def figures(self) -> dict[str, float]:
        """Both rewards' diagnostics over every scored row: rler's and the self-vote's on the same answers."""
        rler, alone, correct, shares = [], [], [], []
        for group in self.groups:
            self_vote = ensemble_reward(group["rows"], {"policy": group["rows"]}, {}, math_verify=False)
            rler += group["rewards"]
            alone += self_vote.rewards
            shares += self_vote.self_shares
            correct += [float(a is not None and a == group["truth"]) for a in group["rows"]]
        ours = diagnostics(rler, correct, shares)
        theirs = diagnostics(alone, correct, shares)
        return {**ours, **{f"self_{name}": value for name, value in theirs.items()},
                "excluded": sum(sum(g["excluded"]) for g in self.groups) / max(1, sum(len(g["rows"]) for g in self.groups))}


def run(seed: int, steps: int, method: str = "rler", overrides=(), heldout: int = 0) -> tuple[dict, Votes]:
    """The run's figures (the diagnostics, for rler and self; held-out greedy accuracy where ``heldout``) and the
    monitor (rler and self)."""
    votes = Votes()
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps, output_dir=out,
                               overrides=[*OVERRIDES[method], *overrides])
        trainer = build_trainer(config, monitor=votes if method != "grpo" else None)
        if method != "grpo":
            votes.plugin = trainer.plugins.plugins["rler"]
        trainer.train()
        figures = votes.figures() if votes.groups else {}
        if heldout:
            figures["accuracy"] = greedy_accuracy(trainer, heldout, seed=1000 + seed)
    return figures, votes


def main() -> None:
    args = arguments(__doc__.splitlines()[0], steps=20, eval_size=128, methods=METHODS).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides,
                                                                  args.eval_size)[0])


if __name__ == "__main__":
    main()
