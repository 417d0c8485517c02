"""Advantage Alignment against plain GRPO in self-play at the iterated prisoner's dilemma on ``stackrl/arith-games``:
the policy in both seats (``configs/recipes/advalign-cpu.yaml``), trained ``--steps`` steps at each seed with the
plugin (``advalign``) and without it (``grpo``: the same recipe, ``plugins: [env]``, GRPO's advantage of each row's
return). Measured on the training rollouts themselves (temperature 1, 32 episodes a step): the share of
cooperative moves and the mean return per seat (5 rounds, 3 a round for mutual cooperation, 1 for mutual
defection), over the first and the last three steps, and the share of episodes that played all 5 rounds over the
last three.

    nice -n 15 python plugins/advalign/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

import yaml

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.blocks.env import END_COLUMN, MOVES_COLUMN, RETURN_COLUMN
from stackrl.testing.benchmark import arguments, compare, training_rollouts

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "advalign-cpu.yaml"
METHODS = ("advalign", "grpo")
FIGURES = ("coop_first", "coop_last", "return_first", "return_last", "done_last")


def recipe_tree(method: str) -> dict:
    """The recipe as a dict, for ``method``: as it is, or plain GRPO (the runner alone, no advalign section)."""
    tree = yaml.safe_load(RECIPE.read_text())
    if method == "grpo":
        tree["plugins"] = ["env"]
        tree.pop("advalign")
    return tree


def rollout_figures(rollout) -> dict[str, float]:
    """A self-play rollout's share of cooperative moves (of every move of its episodes), mean seat return and share
    of rows whose episode played every round (``done``; else a turn cap, the token budget or an unparsed move)."""
    moves = [str(action).strip().upper() for row in rollout.columns[MOVES_COLUMN] for _, action in row]
    returns, ends = rollout.columns[RETURN_COLUMN], rollout.columns[END_COLUMN]
    return {"coop": sum(m == "C" for m in moves) / max(len(moves), 1), "return": sum(returns) / len(returns),
            "done": sum(end == "done" for end in ends) / len(ends)}


def run(method: str = "advalign", seed: int = 0, steps: int = 30, overrides=()):
    """One run of ``method``; returns its figures and the trainer (the last rollout and loss inputs on it)."""
    seen, trainer = training_rollouts(recipe_tree(method), rollout_figures, seed=seed, steps=steps,
                                      overrides=overrides)
    head, tail = seen[:3], seen[-3:]
    mean = lambda rows, key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    figures = {"coop_first": mean(head, "coop"), "coop_last": mean(tail, "coop"),
               "return_first": mean(head, "return"), "return_last": mean(tail, "return"), "done_last": mean(tail, "done")}
    return figures, trainer


def main(argv=None):
    parser = arguments(__doc__.split("\n")[0], steps=30, methods=METHODS)
    args = parser.parse_args(argv)
    return compare(args, args.methods, lambda method, seed, folder: run(method, seed, args.steps, args.overrides)[0],
                   figures=FIGURES)


if __name__ == "__main__":
    main()
