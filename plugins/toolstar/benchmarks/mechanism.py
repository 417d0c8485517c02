"""Tool-Star's hierarchical reward against plain GRPO (exact_match) on the built-in task lookup with both tools
(``configs/recipes/toolstar-cpu.yaml``, ``stackrl/arith-tools``): each question is an episode in which the policy may
search the built-in corpus and calculate. Trained ``--steps`` steps at each seed with the plugin (``toolstar``) and
without it (``grpo``: the same recipe, ``plugins: [env]``, exact_match weight 1). Measured on the training rollouts
themselves (temperature 1), over the first and the last three steps: the share of right answers, of well-formed
episodes (toolstar's format level), and of right answers reached with both tools.

    nice -n 10 python plugins/toolstar/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

from pathlib import Path

import yaml

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.blocks.env import END_COLUMN, INFO_COLUMN
from stackrl.rewards import exact_match, extract_answer
from stackrl.testing.benchmark import arguments, compare, training_rollouts
from stackrl_toolstar.hierarchy import episode

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "toolstar-cpu.yaml"
METHODS = ("toolstar", "grpo")
FIGURES = ("right_first", "right_last", "formed_first", "formed_last", "multi_first", "multi_last")


def recipe_tree(method: str) -> dict:
    """The recipe as a dict, for ``method``: as it is, or plain GRPO (the runner alone, exact_match the reward)."""
    tree = yaml.safe_load(RECIPE.read_text())
    if method == "grpo":
        tree["plugins"] = ["env"]
        tree.pop("toolstar")
        tree["rewards"] = {"exact_match": 1.0, "env": 0.0}
    return tree


def rollout_figures(rollout) -> dict[str, float]:
    """A rollout's share of right answers, well-formed episodes and right answers reached with two tools."""
    rows = len(rollout)
    facts = [episode(info, end, extract_answer(c) is not None) for c, info, end in
             zip(rollout.completions, rollout.columns[INFO_COLUMN], rollout.columns[END_COLUMN])]
    right = [f.well_formed and bool(exact_match(c, str(a)))
             for f, c, a in zip(facts, rollout.completions, rollout.columns["answer"])]
    return {"right": sum(right) / rows, "formed": sum(f.well_formed for f in facts) / rows,
            "multi": sum(r and len(f.tools) >= 2 for r, f in zip(right, facts)) / rows}


def run(method: str = "toolstar", seed: int = 0, steps: int = 20, overrides=()):
    """One run of ``method``; returns its figures and the trainer (the last rollout still on it)."""
    seen, trainer = training_rollouts(recipe_tree(method), rollout_figures, seed=seed, steps=steps,
                                      overrides=overrides)
    head, tail = seen[:3], seen[-3:]
    mean = lambda rows, key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    figures = {f"{key}_{part}": mean(rows, key) for key in ("right", "formed", "multi")
               for part, rows in (("first", head), ("last", tail))}
    return figures, trainer


def main(argv=None):
    parser = arguments(__doc__.split("\n")[0], steps=20, methods=METHODS)
    args = parser.parse_args(argv)
    return compare(args, args.methods, lambda method, seed, folder: run(method, seed, args.steps, args.overrides)[0],
                   figures=FIGURES)


if __name__ == "__main__":
    main()
