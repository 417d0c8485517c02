"""SwS's mechanism on the built-in task: the problems the policy writes for its weak categories, and the weak
categories' held-out accuracy against plain GRPO.

Trains the CPU recipe (configs/recipes/sws-cpu.yaml: stackrl/arith-skills on the six categories; a synthesis round
at step 10 from the pass rates recorded so far) and the same recipe without the plugin, for the same steps and
seeds, and prints for each run:

- ``weak``: the categories the round found weak (the same for the GRPO run of that seed, which has no round);
- ``added``: the written problems that passed the answer check and joined the pool; ``right``: the share of them
  whose reference answer is the question's true answer (read from the question, ``read_problem``);
  ``in_category``: the share that are questions of the category they were written for;
- ``weak_acc``: held-out pass@1 on the weak categories after training (their test split, ``eval.samples`` samples a
  problem at temperature 1, seeded), and ``acc`` on all categories.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/sws/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sws-cpu.yaml"
WEAK: dict[int, list[str]] = {}  # seed -> the weak categories its sws run found (the GRPO run is measured on them)


class PassRates:
    """A run monitor: at each of sws's post_step calls on a new batch, each drawn row's pass rate (from the pool's
    statistics, read apart from the plugin's own record), in order; and the rows the plugin had written by then."""

    def __init__(self):
        self.batches: list[list[tuple[int, float | None]]] = []
        self._seen = 0

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "post_step" or plugin != "sws":
            return
        pool = kwargs["ctx"].pool
        if pool.batches != self._seen:
            self._seen = pool.batches
            self.batches.append([(row, pool.stats(row).last_pass_rate) for row in pool.last_batch])


def run(method: str = "sws", seed: int = 0, steps: int = 30, folder: Path | None = None, overrides=(),
        eval_size: int | None = None) -> dict:
    """Train one run (``sws`` or ``grpo``) and measure it; with ``eval_size`` None, no held-out evaluation (the
    mechanism test). Torch on one thread throughout. Returns the figures, and for an sws run ``trainer`` and
    ``monitor`` (the recorded pass rates) for a test's hand checks."""
    import tempfile

    from stackrl.evaluation import evaluate
    from stackrl.run import build_trainer
    from stackrl.tasks.arithmetic import read_problem
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import recipe_config

    with one_thread(), tempfile.TemporaryDirectory() as tmp:
        folder = Path(folder or tmp)
        config = recipe_config(RECIPE, plugins=method == "sws", seed=seed, steps=steps,
                               output_dir=folder / f"{method}-{seed}", overrides=overrides)
        monitor = PassRates()
        trainer = build_trainer(config, monitor=monitor if method == "sws" else None)
        trainer.train()
        figures: dict = {}
        if method == "sws":
            sws = trainer.plugins.plugins["sws"]
            rows = [trainer.pool.row(i) for i in (sws.last_round or {}).get("added", [])]
            read = [read_problem(row["question"]) for row in rows]
            WEAK[seed] = sorted((sws.last_round or {}).get("budgets", {}))
            figures.update(
                added=len(rows),
                right=sum(r is not None and r["answer"] == row["answer"] for r, row in zip(read, rows)) / max(len(rows), 1),
                in_category=sum(r is not None and r["category"] == row["category"] for r, row in zip(read, rows))
                / max(len(rows), 1),
                trainer=trainer, monitor=monitor,
            )
        weak = WEAK.get(seed, [])
        figures["weak"] = len(weak)
        if eval_size:
            length = trainer.args.max_completion_length
            measured = recipe_config(RECIPE, plugins=False, seed=seed, steps=steps, output_dir=folder / "eval",
                                     overrides=[*overrides, f"eval.size={eval_size}"])
            found = evaluate(trainer.model, trainer.processing_class, measured, length)
            figures["acc"] = found["pass@1"]
            by = found["by_category"]
            figures["weak_acc"] = sum(by[c] for c in weak if c in by) / max(sum(c in by for c in weak), 1)
        return figures


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo

    def measured(method, seed, steps, folder, overrides, size):
        figures = run(method, seed, steps, folder, overrides, size)
        return {k: v for k, v in figures.items() if k not in ("trainer", "monitor")}

    against_plain_grpo(__doc__.split("\n\n")[0], "sws", measured,
                       ("weak", "added", "right", "in_category", "weak_acc", "acc"), steps=30, eval_size=300)


if __name__ == "__main__":
    main()
