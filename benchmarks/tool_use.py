"""Plain GRPO in the environment runner raises ``stackrl/arith-tools``' correct use of its tools within minutes: the
baseline the tool-using plugins are measured against.

Each seed trains ``configs/recipes/env-cpu.yaml`` (the calculator on the arithmetic task; ``--task lookup``:
``configs/recipes/env-search-cpu.yaml``, the search tool on the lookup task), the ``env`` plugin alone rewarded by
exact match, for ``--steps`` steps, and measures the policy before and after on the same ``--eval-size`` held-out
problems, sampled at temperature 1 as training samples, played as the runner plays them
(:func:`stackrl.blocks.env.pretrain_tools.evaluate_tools`): accuracy with the tool, calls per step (per problem on
lookup), the share of correct calls, and accuracy without the tool.

    nice python benchmarks/tool_use.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.blocks.env.pretrain_tools import evaluate_tools
from stackrl.run import build_trainer
from stackrl.tasks import TASKS
from stackrl.testing.benchmark import arguments, changes, compare, one_thread
from stackrl.testing.heldout import recipe_config

RECIPES = {task: Path(__file__).resolve().parents[1] / "configs" / "recipes" / name
           for task, name in (("arithmetic", "env-cpu.yaml"), ("lookup", "env-search-cpu.yaml"))}
FIGURES = ("accuracy", "call_rate", "call_correct", "no_tool")


def run(seed: int, steps: int, overrides=(), eval_size: int = 200, task: str = "arithmetic") -> dict[str, float]:
    """One seed's figures before and after ``steps`` steps of the task's recipe."""
    test = TASKS[task]("test", size=eval_size, seed=0)
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPES[task], plugins=True, seed=seed, steps=steps, output_dir=out, overrides=overrides)
        trainer = build_trainer(config)
        model, tokenizer = trainer.model, trainer.processing_class
        before = evaluate_tools(model, tokenizer, test, greedy=False, seed=seed)
        trainer.train()
        after = evaluate_tools(model, tokenizer, test, greedy=False, seed=seed)
    return changes({name: before[name] for name in FIGURES}, {name: after[name] for name in FIGURES})


def main(argv=None) -> dict[str, list[dict]]:
    parser = arguments(__doc__.split("\n")[0], steps=20, eval_size=200)
    parser.add_argument("--task", choices=list(RECIPES), default="arithmetic")
    args = parser.parse_args(argv)
    return compare(args, ("grpo",), lambda method, seed, folder: run(seed, args.steps, args.overrides, args.eval_size,
                                                                      args.task))


if __name__ == "__main__":
    main()
