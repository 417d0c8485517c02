"""Sandboxed runs per second on this machine, isolated (bubblewrap, unshare) and not, one at a time and on the pool.

Each round runs the same batch of short programs (a function and its assertions, what a unit-test reward runs) in
six ways, alternating so that load from other processes falls on all alike: under bubblewrap, under unshare and
unisolated, one run at a time and ``--workers`` at once. It prints one ``<way>_runs_per_s: X`` line each (the
median over the rounds) and ``isolation_cost_ratio: X``, the bubblewrap pool's time per run over the unisolated
pool's.

    .venv/bin/python benchmarks/sandbox.py [--runs 200] [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
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


def main(argv=None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="programs per way and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="the pool's size (sandbox.workers)")
    args = parser.parse_args(argv)
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
