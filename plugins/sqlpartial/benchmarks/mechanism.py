"""Reasoning-SQL's partial rewards on the built-in SQL task and stackrl/arith-code, against the execution reward alone.

A short run of configs/recipes/sqlpartial-cpu.yaml (a pool of 64 train problems, 4 queries each) logs each term's
share per step (sqlpartial/execution, /syntax, /schema, /ngram, /format) and the reward. After training, the
policy's greedy queries on held-out problems of the test split are run on their tables: the share whose rows are
the reference's (execution accuracy) and the mean partial reward. The comparison is the paper's: the same run with
every partial term's weight 0 (execution only, 3 for the reference's rows). Plain GRPO without the plugin has no
reward on this task (the built-in exact_match reads an arithmetic answer), so it is not a baseline here.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/sqlpartial/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sqlpartial-cpu.yaml"
PARTIAL = ("syntax", "schema", "ngram", "format")
EXECUTION_ONLY = tuple(f"sqlpartial.{term}_weight=0.0" for term in PARTIAL)


def heldout(trainer, size: int) -> dict[str, float]:
    """Greedy execution accuracy and mean partial reward (the default weights) of the trained policy on ``size``
    test problems."""
    from stackrl.tasks.sql import make_dataset
    from stackrl.testing.fixtures import make_plugin

    plugin = make_plugin("sqlpartial")
    rows = make_dataset("test", size, seed=0)
    replies = trainer._shared_policy.generate(list(rows["question"]), do_sample=False)
    scores = [plugin.score(reply.text, row["setup"], row["solution"]) for reply, row in zip(replies, rows)]
    weights = plugin.weights()
    return {"heldout_execution": sum(s["execution"] for s in scores) / size,
            "heldout_reward": sum(sum(weights[t] * s[t] for t in s) for s in scores) / size}


def run(seed: int, steps: int, method: str = "sqlpartial", overrides=(), eval_size: int = 0) -> dict:
    """Per-step term shares and rewards logged by the run (lists), their first and last thirds' means, and with
    ``eval_size`` the held-out figures."""
    settings = [*overrides, *(EXECUTION_ONLY if method == "execution" else ())]
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out, overrides=settings)
        trainer = build_trainer(config)
        trainer.train()
        figures = heldout(trainer, eval_size) if eval_size else {}
    logged = [row for row in trainer.state.log_history if "sqlpartial/execution" in row]
    third = max(1, len(logged) // 3)
    for name in ("execution", *PARTIAL):
        series = [row[f"sqlpartial/{name}"] for row in logged]
        figures[name] = series
        figures[f"{name}_first"] = sum(series[:third]) / third
        figures[f"{name}_last"] = sum(series[-third:]) / third
    # The full partial reward of every step's samples, whatever the run's weights (3 for execution, 1 for the rest).
    full = [3 * row["sqlpartial/execution"] + sum(row[f"sqlpartial/{t}"] for t in PARTIAL) for row in logged]
    figures["partial_reward"] = full
    figures["partial_first"], figures["partial_last"] = sum(full[:third]) / third, sum(full[-third:]) / third
    return figures


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=24, eval_size=140, methods=("sqlpartial", "execution")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.eval_size),
            figures=("heldout_execution", "heldout_reward", "execution_first", "execution_last", "partial_first",
                     "partial_last", "syntax_last", "schema_last"))


if __name__ == "__main__":
    main()
