"""eva's creator on the built-in posing model (stackrl/arith-skills): the prompts it evolves are those whose groups
had the highest regret, and the prompts it adds are variants of them; and the whole loop against plain GRPO.

A run of configs/recipes/eva-cpu.yaml. A monitor keeps every group the plugin reads (its row and its exact_match
rewards) and, after each creator round, the rows the round added with their parents. From the groups it computes
each row's regret by hand (`eva.regret` of the row's latest group since the last round) and the
parents a top choice must make (`eva.select=top`): `parents_match` is the share of rounds whose parents are exactly
those, `from_parent` the share of variants written in reply to a request that showed their own parent. `own_parent` is the mean ROUGE-L of a variant to its own parent, `other_parent` to the round's other parents;
`same_category` the share of variants of the task's form in their parent's category, `other_category` in the other
parents'. `informative` is the share of the evolved rows' groups with a regret above 0, `dataset_informative` of the
dataset rows' groups. Then held-out greedy accuracy after training, against plain GRPO at equal steps.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/eva/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from stackrl.blocks.selfinstruct import rouge_l
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.heldout import greedy_accuracy, recipe_config
from stackrl_eva.creator import first_problem

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "eva-cpu.yaml"


def hand_regret(rewards: list[float], kind: str) -> float:
    """A group's regret, written out: the best minus the worst, the best minus the mean, or the variance."""
    mean = sum(rewards) / len(rewards)
    if kind == "gap":
        return max(rewards) - min(rewards)
    if kind == "maxmean":
        return max(rewards) - mean
    return sum((r - mean) ** 2 for r in rewards) / len(rewards)


class Rounds:
    """A run's monitor: the groups eva read, and each creator round's parents and variants."""

    def __init__(self):
        self.trainer = None
        self.groups: list[dict] = []  # step, row, rewards
        self.rounds: list[dict] = []  # step, expected (hand-made top parents), chosen, variants {row: parent}
        self._since: dict[int, float] = {}  # row -> hand regret, since the last round
        self._known: set[int] = set()
        self._asked: list[tuple[str, str]] = []  # this round's (request, reply)

    def watch(self, trainer) -> None:
        """Follow ``trainer``'s eva: its requests for variants and the replies, as they are written."""
        self.trainer = trainer
        eva = trainer.plugins.plugins["eva"]
        write = eva.generate

        def recorded(ctx, prompts, **sampling):
            replies = write(ctx, prompts, **sampling)
            self._asked += [(prompt, reply.text) for prompt, reply in zip(prompts, replies)]
            return replies

        eva.generate = recorded

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "post_step" or plugin != "eva":
            return
        ctx = kwargs["ctx"]
        eva = self.trainer.plugins.plugins["eva"]
        config, rollout = eva.config, ctx.rollout
        size = rollout.group_size
        rewards = rollout.rewards[config.reward].tolist()
        for g, row in enumerate(ctx.pool.last_batch):
            group = rewards[g * size:(g + 1) * size]
            self.groups.append({"step": ctx.step, "row": row, "rewards": group})
            if not any(math.isnan(r) for r in group):
                self._since[row] = hand_regret(group, config.regret)
        if ctx.step % config.every_steps:
            return
        scored = list(self._since.items())
        count = math.ceil(config.select_frac * len(scored)) if scored else 0
        low, high = min((r for _, r in scored), default=0.0), max((r for _, r in scored), default=0.0)
        floor = low if high > low else 0.0  # the lowest of several weighs 0; where all are alike, a regret of 0
        ranked = sorted([(row, r) for row, r in scored if r > floor], key=lambda item: -item[1])
        new = {row: parent for row, parent in eva.parents.items() if row not in self._known}
        self._known.update(new)
        texts = {row: ctx.pool.row(row)[config.problem_column].strip() for row in [*new, *new.values()]}
        # The request each variant answered: the one whose reply's first problem it is.
        shown = {}
        for request, reply in self._asked:
            problem = first_problem(reply, ctx.pool.chat)
            if problem is not None:
                shown.setdefault(problem, request.splitlines()[-2].removeprefix("1. "))
        self.rounds.append({"step": ctx.step, "expected": sorted(row for row, _ in ranked[:count]),
                            "chosen": sorted(eva.chosen), "variants": new, "texts": texts,
                            "shown": {row: shown.get(texts[row]) for row in new},
                            "requests": sorted(request.splitlines()[-2].removeprefix("1. ")
                                               for request, _ in self._asked)})
        self._since, self._asked = {}, []

    def figures(self) -> dict[str, float]:
        def mean(values):
            values = [v for v in values if v is not None]
            return sum(values) / len(values) if values else float("nan")

        own, other, same, other_same = [], [], [], []
        for r in self.rounds:
            texts, parents = r["texts"], sorted(set(r["variants"].values()))
            for row, parent in r["variants"].items():
                own.append(rouge_l(texts[row], texts[parent]))
                others = [p for p in parents if p != parent]
                if others:
                    other.append(mean([rouge_l(texts[row], texts[p]) for p in others]))
                variant = read_problem(texts[row])
                if variant is not None:
                    mine = read_problem(texts[parent])
                    same.append(mine is not None and mine["category"] == variant["category"])
                    if others:
                        theirs = [read_problem(texts[p]) for p in others]
                        other_same.append(mean([t is not None and t["category"] == variant["category"]
                                                for t in theirs]))
        evolved = {row for r in self.rounds for row in r["variants"]}
        informative = [max(g["rewards"]) > min(g["rewards"]) for g in self.groups
                       if g["row"] in evolved and not any(math.isnan(x) for x in g["rewards"])]
        dataset = [max(g["rewards"]) > min(g["rewards"]) for g in self.groups
                   if g["row"] not in evolved and not any(math.isnan(x) for x in g["rewards"])]
        return {
            "rounds": len(self.rounds), "variants": len(evolved),
            "parents": mean([len(r["chosen"]) for r in self.rounds]),
            "parents_match": mean([r["chosen"] == r["expected"] for r in self.rounds]),
            "from_parent": mean([r["shown"][row] == r["texts"][parent] for r in self.rounds
                                 for row, parent in r["variants"].items()]),
            "own_parent": mean(own), "other_parent": mean(other),
            "same_category": mean(same), "other_category": mean(other_same),
            "informative": mean(informative), "dataset_informative": mean(dataset),
        }


def run(seed: int = 0, steps: int = 24, method: str = "eva", overrides=(), heldout: int = 0) -> tuple[dict, Rounds]:
    """Train ``method`` (``eva``: the recipe; ``grpo``: the same recipe without its plugin) for ``steps`` steps: its
    figures (the monitor's, for eva; held-out greedy accuracy on ``heldout`` problems where given) and the monitor."""
    rounds = Rounds()
    with tempfile.TemporaryDirectory() as out:
        settings = list(overrides) if method == "eva" else [o for o in overrides if not o.startswith("eva.")]
        config = recipe_config(RECIPE, plugins=method == "eva", seed=seed, steps=steps, output_dir=out,
                               overrides=settings)
        trainer = build_trainer(config, monitor=rounds if method == "eva" else None)
        if method == "eva":
            rounds.watch(trainer)
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
    return ({**figures, **rounds.figures()} if method == "eva" else figures), rounds


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=24, eval_size=128, methods=("eva", "grpo"))
    args = parser.parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.eval_size)[0],
            figures=("accuracy", "rounds", "variants", "parents", "parents_match", "from_parent", "own_parent", "other_parent",
                     "same_category", "other_category", "informative", "dataset_informative"))


if __name__ == "__main__":
    main()
