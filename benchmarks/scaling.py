"""How a step's cost grows with the work, relative to plain GRPOTrainer measured in the same run.

Four sweeps, each its own set of alternating rounds (:mod:`stackrl.testing.steptime`) against ``plain``:

- ``plugins``: 0, 1, 4 and 8 stacked no-op plugins (the ``noop`` test plugin, one hook per stage, under distinct
  names), on the tiny model of benchmarks/overhead.py; the least-squares slope of the ratio against the number
  of plugins is the cost of one more plugin, as a fraction of a step: ``per_plugin_cost``;
- ``group``: one no-op plugin at group sizes (``num_generations``) 4, 8, 16;
- ``length``: one no-op plugin at ``max_completion_length`` 32, 64, 128;
- ``stack``: a realistic stack on the built-in model, each plugin alone and all three stacked: ``covo`` (a
  self-reward scoring probes), ``rlsd`` (token advantages from a teacher forward) and ``opsd`` (a distillation
  loss term), with their CPU recipes' settings. Stacking should cost the sum of its parts: the stack's extra cost
  is printed beside the sum of the plugins' extra costs alone.

Every point prints its ratio (wall-clock; CPU time beside it) with the spread of the per-round ratios; the plot
(``--plot``) draws the four sweeps with that spread as error bars.

    python benchmarks/scaling.py [--rounds 5] [--steps 6] [--warmup 1] [--plot scaling.png]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import datasets  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from stackrl.tasks import arith_tiny_path  # noqa: E402
from stackrl.testing.repository import method_plugins, use_fixture_plugins  # noqa: E402
from stackrl.testing.steptime import Rounds, Variant, use_threads  # noqa: E402
from stackrl.testing.tiny import TINY_TRAINER, build_tiny_model, tiny_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRAINER = {
    **TINY_TRAINER,
    "per_device_train_batch_size": 32,
    "num_generations": 8,
    "max_completion_length": 32,
    "learning_rate": 1e-4,
}
STACK = ("covo", "rlsd", "opsd")
STACK_GENERATIONS = 8


def noops(config, count: int):
    """A factory of ``count`` no-op plugins named noop1, noop2, ..."""
    cls = config.plugin_classes["noop"]

    def make():
        plugins = [cls(config.plugin_configs["noop"]) for _ in range(count)]
        for i, plugin in enumerate(plugins, 1):
            plugin.name = f"noop{i}"
        return plugins

    return make


class Sweeps:
    def __init__(self, work: Path, opts):
        self.work, self.opts = work, opts
        self.model_dir = build_tiny_model(work / "model")
        self.points: dict[str, list[tuple[str, float, float, tuple]]] = {}

    def config(self, plugins, *, model=None, trainer=None, **sections):
        trainer = {**TRAINER, **(trainer or {}), "max_steps": self.opts.steps}
        data = {"source": "arithmetic", "size": 512, "seed": 0}
        return tiny_config(model or self.model_dir, plugins, tmp_dir=self.work, output_dir=str(self.work / "out"),
                           trainer=trainer, data=data, **sections)

    def measure(self, sweep: str, variants: dict[str, Variant]) -> Rounds:
        rounds = Rounds({"plain": variants.pop("plain"), **variants}, warmup=self.opts.warmup)
        rounds.run(self.opts.rounds)
        for name in variants:
            ratios = rounds.ratio(name, "plain"), rounds.ratio(name, "plain", "cpu")
            point = (name, *ratios, rounds.spread(name, "plain"))
            self.points.setdefault(sweep, []).append(point)
            low, _, _, _, high = point[3]
            print(f"{sweep:>7} {name:>16}: {point[1]:.4f} wall, {point[2]:.4f} cpu   per-round range "
                  f"{low:.4f}-{high:.4f}", flush=True)
        return rounds

    def plugins(self) -> float:
        noop = self.config(["noop"])
        counts = self.opts.plugin_counts
        variants = {"plain": Variant(noop), **{f"{n} no-ops": Variant(noop, noops(noop, n)) for n in counts}}
        rounds = self.measure("plugins", variants)
        ratios = [rounds.ratio(f"{n} no-ops", "plain") for n in counts]
        mean_n, mean_r = sum(counts) / len(counts), sum(ratios) / len(ratios)
        return sum((n - mean_n) * (r - mean_r) for n, r in zip(counts, ratios)) / sum(
            (n - mean_n) ** 2 for n in counts
        )

    def sweep(self, name: str, key: str, values) -> None:
        for value in values:
            noop = self.config(["noop"], trainer={key: value})
            self.measure(name, {"plain": Variant(noop), f"{key}={value}": Variant(noop, noop.plugins)})

    def stack(self) -> tuple[float, float]:
        recipes = method_plugins(ROOT)
        sections = {name: recipes[name]["settings"] for name in STACK}

        trainer = {"per_device_train_batch_size": self.opts.stack_prompts * STACK_GENERATIONS,
                   "num_generations": STACK_GENERATIONS, "max_completion_length": self.opts.stack_length, "beta": 0.0}

        def config(plugins):
            rewards = {"exact_match": 1.0, **{name: 1.0 for name in plugins if name == "covo"}}
            return self.config(list(plugins), model=arith_tiny_path(), trainer=trainer, rewards=rewards,
                               **{name: sections[name] for name in plugins})

        plain = config([])
        variants = {"plain": Variant(plain)}
        for plugins in [(name,) for name in STACK] + [STACK]:
            stacked = config(plugins)
            variants["+".join(plugins)] = Variant(stacked, stacked.plugins)
        rounds = self.measure("stack", variants)
        alone = sum(rounds.ratio(name, "plain") - 1 for name in STACK)
        return rounds.ratio("+".join(STACK), "plain") - 1, alone

    def plot(self, path: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(self.points), figsize=(4.2 * len(self.points), 3.6), squeeze=False)
        for ax, (sweep, points) in zip(axes[0], self.points.items()):
            names = [p[0] for p in points]
            ratios = [p[1] for p in points]
            errors = [[p[1] - p[3][0] for p in points], [p[3][4] - p[1] for p in points]]
            errors = [[max(0.0, e) for e in side] for side in errors]
            ax.errorbar(range(len(points)), ratios, yerr=errors, fmt="o" if sweep == "stack" else "o-", capsize=4)
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_xticks(range(len(points)), names, rotation=20, ha="right", fontsize=8)
            ax.set_title(sweep)
            ax.set_ylabel("step time / plain TRL (wall)")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        print(f"plot written to {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=6, help="steps per variant per round, warmup included")
    parser.add_argument("--warmup", type=int, default=1, help="steps dropped at the start of every round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--plugin-counts", type=int, nargs="+", default=[0, 1, 4, 8])
    parser.add_argument("--group-sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--stack-prompts", type=int, default=2, help="prompts per stack step (x8 samples)")
    parser.add_argument("--stack-length", type=int, default=64, help="max_completion_length of the stack sweep")
    parser.add_argument("--plot", default="scaling.png", help="where the PNG goes")
    opts = parser.parse_args(argv)
    if opts.steps <= opts.warmup:
        parser.error("--steps must exceed --warmup")
    if len(set(opts.plugin_counts)) < 2:
        parser.error("--plugin-counts needs two different counts for a slope")

    use_fixture_plugins(ROOT)  # the noop plugin
    use_threads(opts.threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="stackrl-scaling-") as work:
        sweeps = Sweeps(Path(work), opts)
        print(f"{opts.rounds} rounds x {opts.steps} steps per variant ({opts.warmup} dropped), torch threads "
              f"{opts.threads}; ratios of wall-clock medians to plain TRL in the same rounds", flush=True)
        slope = sweeps.plugins()
        sweeps.sweep("group", "num_generations", opts.group_sizes)
        sweeps.sweep("length", "max_completion_length", opts.lengths)
        stacked, alone = sweeps.stack()
        sweeps.plot(opts.plot)
    print(f"stack {'+'.join(STACK)}: extra cost {stacked:.4f} of a step; its plugins alone add up to {alone:.4f}")
    print(f"per_plugin_cost: {slope:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
