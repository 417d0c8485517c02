"""Sandboxed runs per second on this machine, isolated (bubblewrap, unshare) and not, one at a time and on the pool.

Each round runs the same batch of short programs (a function and its assertions, what a unit-test reward runs) in
six ways, alternating so that load from other processes falls on all alike: under bubblewrap, under unshare and
unisolated, one run at a time and ``--workers`` at once. It prints one ``<way>_runs_per_s: X`` line each (the
median over the rounds) and ``isolation_cost_ratio: X``, the bubblewrap pool's time per run over the unisolated
pool's.

    .venv/bin/python benchmarks/sandbox.py [--runs 200] [--rounds 3] [--workers 2]

With ``--step-share PLUGIN ...`` it measures instead the share of a training step the plugin's reward hook takes
(for venus, its sandboxed runs; for cscsql and sqlpartial, their queries on read-only SQLite, which run in the
trainer's process), training each plugin's CPU recipe ``--share-steps`` steps: one ``<plugin>_reward_share: X``
line each, the hook's seconds over the training's.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sandbox.py --step-share venus cscsql sqlpartial [--share-steps 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from stackrl.blocks.sandbox import Sandbox
from stackrl.sandbox_section import SandboxSection

PROGRAM = """
def gcd(a, b):
    while b:
        a, b = b, a % b
    return a

assert gcd(12, 18) == 6
assert gcd(17, 5) == 1
print(gcd(2 ** 20, 6 ** 8))
"""


def rate(sandbox: Sandbox, runs: int, pooled: bool) -> float:
    """Runs per second of ``runs`` copies of the program, checked to have passed."""
    started = time.perf_counter()
    if pooled:
        results = sandbox.run_many([PROGRAM] * runs)
    else:
        results = [sandbox.run(PROGRAM) for _ in range(runs)]
    elapsed = time.perf_counter() - started
    failed = [result for result in results if not result.ok]
    if failed:
        raise RuntimeError(f"a benchmark run failed: {failed[0]}")
    return runs / elapsed


def reward_share(plugin: str, steps: int, seed: int = 0) -> float:
    """The seconds ``plugin``'s reward hook took over the seconds of ``steps`` training steps of its CPU recipe
    (``configs/recipes/<plugin>-cpu.yaml``), torch on one thread."""
    from importlib.metadata import entry_points
    from pathlib import Path

    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import recipe_config

    recipe = Path(__file__).resolve().parents[1] / "configs" / "recipes" / f"{plugin}-cpu.yaml"
    cls = entry_points(group="stackrl.plugins")[plugin].load()
    hook, spent = cls.reward, []

    def reward(self, ctx):  # the hook's own signature: pluggy reads its argument names
        started = time.perf_counter()
        try:
            return hook(self, ctx)
        finally:
            spent.append(time.perf_counter() - started)

    reward.__dict__.update(hook.__dict__)  # the hook marker
    cls.reward = reward
    try:
        with tempfile.TemporaryDirectory() as out, one_thread():
            config = recipe_config(recipe, plugins=True, seed=seed, steps=steps, output_dir=out,
                                   overrides=["trainer.disable_tqdm=true"])
            trainer = build_trainer(config)
            started = time.perf_counter()
            trainer.train()
            total = time.perf_counter() - started
    finally:
        cls.reward = hook
    return sum(spent) / total


def main(argv=None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="programs per way and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="the pool's size (sandbox.workers)")
    parser.add_argument("--step-share", nargs="+", metavar="PLUGIN", help="measure the share of a training step "
                        "these plugins' reward hooks take instead (their CPU recipes)")
    parser.add_argument("--share-steps", type=int, default=4, help="training steps of each recipe (--step-share)")
    args = parser.parse_args(argv)
    if args.step_share:
        shares = {}
        for plugin in args.step_share:
            shares[f"{plugin}_reward_share"] = reward_share(plugin, args.share_steps)
            print(f"{plugin}_reward_share: {shares[f'{plugin}_reward_share']:.3f} ({args.share_steps} steps)")
        return shares
    sandboxes = {
        "bwrap": Sandbox(SandboxSection(workers=args.workers, isolation="bwrap")),
        "unshare": Sandbox(SandboxSection(workers=args.workers, isolation="unshare")),
        "unisolated": Sandbox(SandboxSection(workers=args.workers, isolation="none", allow_unisolated=True)),
    }
    rates: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, sandbox in sandboxes.items():
            for pooled in (False, True):
                way = f"{name}_{'pool' if pooled else 'serial'}"
                rates.setdefault(way, []).append(rate(sandbox, args.runs, pooled))
    figures = {way: statistics.median(values) for way, values in rates.items()}
    for way, value in figures.items():
        print(f"{way}_runs_per_s: {value:.1f}")
    figures["isolation_cost_ratio"] = figures["unisolated_pool"] / figures["bwrap_pool"]
    print(f"isolation_cost_ratio: {figures['isolation_cost_ratio']:.2f}")
    print(f"interpreter: {' '.join(sandboxes['bwrap'].interpreter)}; workers: {args.workers}")
    return figures


if __name__ == "__main__":
    main()
