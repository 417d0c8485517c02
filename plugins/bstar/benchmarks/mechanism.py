"""B-STaR on the built-in task: each probe's chosen temperature and each batch's threshold, against the balance score.

A short run of configs/recipes/bstar-cpu.yaml (GRPO, a probe of the last batch's first problems at each temperature
of the grid after every step). A monitor keeps every probe (its samples at each temperature, and the temperature
chosen) and every batch (its rows, their right answers, the rows left out of the loss), for a test to recompute the
choices by hand. Against plain GRPO at equal steps and seeds: greedy held-out accuracy after training, and the
share of right answers among the rows trained on.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/bstar/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "bstar-cpu.yaml"


class Choices:
    """A run's monitor: every probe and every batch bstar saw."""

    def __init__(self):
        self.plugin = None  # the run's bstar, set once the trainer is built
        self.probes: list[dict] = []  # {"step", "samples": {temperature: [[(text, right), ...] per problem]}, "chosen"}
        self.batches: list[dict] = []  # {"step", "groups": [[(text, right), ...] per group], "excluded": set}

    def __call__(self, hook, plugin, kwargs, result):
        if plugin != "bstar":
            return
        ctx = kwargs["ctx"]
        if hook == "reshape_advantages" and ctx.training:
            rollout, size = ctx.rollout, ctx.rollout.group_size
            rows = [(text, bool(exact_match(text, answer)))
                    for text, answer in zip(rollout.completions, rollout.columns["answer"])]
            self.batches.append({"step": ctx.step, "excluded": set(rollout.excluded),
                                 "groups": [rows[i:i + size] for i in range(0, len(rows), size)]})
        elif hook == "post_step" and self.plugin.last_probe is not None:
            probe, self.plugin.last_probe = self.plugin.last_probe, None
            samples = {t: [[(c.text, c.correct) for c in query] for query in queries] for t, queries in probe.items()}
            self.probes.append({"step": ctx.step, "samples": samples, "chosen": self.plugin.temperature})


def run(seed: int, steps: int, method: str = "bstar", overrides=(), heldout: int = 100) -> tuple[dict, Choices]:
    """The run's figures (greedy held-out accuracy after; for bstar the mean temperature chosen and the share of
    right answers among the rows kept in the loss) and, for bstar, its monitor."""
    choices = Choices()
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "bstar", seed=seed, steps=steps, output_dir=out,
                               overrides=[o for o in overrides if method == "bstar" or not o.startswith("bstar.")])
        trainer = build_trainer(config, monitor=choices)
        choices.plugin = trainer.plugins.plugins.get("bstar")
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)}
    if method == "bstar":
        kept = [right for batch in choices.batches for i, (_, right) in
                enumerate(row for group in batch["groups"] for row in group) if i not in batch["excluded"]]
        figures["kept_right"] = sum(kept) / max(len(kept), 1)
        figures["temperature"] = sum(p["chosen"] for p in choices.probes) / max(len(choices.probes), 1)
    return figures, choices


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=30, methods=("bstar", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("accuracy", "kept_right", "temperature"))


if __name__ == "__main__":
    main()
