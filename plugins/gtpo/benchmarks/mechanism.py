"""GTPO against plain GRPO on the built-in arithmetic task as multi-turn tool-integrated reasoning, with the built-in
code model ``stackrl/arith-code`` (``configs/recipes/gtpo-cpu.yaml``): each turn is a Python cell run in a sandboxed
interpreter kept across the episode's turns, up to 3 turns, reward 1 when a cell shows the answer. Trained
``--steps`` steps at each seed with the plugin (``gtpo``) and without it (``grpo``: the same recipe,
``plugins: [env]``, GRPO's advantage of each episode's return on all its actions). Measured on the training
rollouts themselves (temperature 1): the share of solved episodes over the first and the last three steps, the
share solved at the first turn over the last three, and the mean number of turns over the last three.

    nice -n 10 python plugins/gtpo/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

from pathlib import Path

import yaml

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.blocks.env import RETURN_COLUMN, TURN_REWARDS_COLUMN
from stackrl.testing.benchmark import arguments, compare, training_rollouts

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "gtpo-cpu.yaml"
METHODS = ("gtpo", "grpo")
FIGURES = ("solved_first", "solved_last", "first_turn_last", "turns_last")


def recipe_tree(method: str) -> dict:
    """The recipe as a dict, for ``method``: as it is, or plain GRPO (the runner alone, no gtpo section)."""
    tree = yaml.safe_load(RECIPE.read_text())
    if method == "grpo":
        tree["plugins"] = ["env"]
        tree.pop("gtpo")
    return tree


def rollout_figures(rollout) -> dict[str, float]:
    """A rollout's share of solved episodes, of episodes solved at their first cell, and mean turns."""
    returns, paid = rollout.columns[RETURN_COLUMN], rollout.columns[TURN_REWARDS_COLUMN]
    rows = len(returns)
    return {"solved": sum(r >= 1.0 for r in returns) / rows,
            "first_turn": sum(bool(p) and p[0] >= 1.0 for p in paid) / rows,
            "turns": sum(len(p) for p in paid) / rows}


def run(method: str = "gtpo", seed: int = 0, steps: int = 20, overrides=()):
    """One run of ``method``; returns its figures and the trainer (the last rollout and loss inputs on it)."""
    seen, trainer = training_rollouts(recipe_tree(method), rollout_figures, seed=seed, steps=steps,
                                      overrides=overrides)
    head, tail = seen[:3], seen[-3:]
    mean = lambda rows, key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    figures = {"solved_first": mean(head, "solved"), "solved_last": mean(tail, "solved"),
               "first_turn_last": mean(tail, "first_turn"), "turns_last": mean(tail, "turns")}
    return figures, trainer


def main(argv=None):
    parser = arguments(__doc__.split("\n")[0], steps=20, methods=METHODS)
    args = parser.parse_args(argv)
    return compare(args, args.methods, lambda method, seed, folder: run(method, seed, args.steps, args.overrides)[0],
                   figures=FIGURES)


if __name__ == "__main__":
    main()
