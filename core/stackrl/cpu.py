"""How many threads torch computes with in a run on the CPU, and how long its idle threads spin.

The default is one thread per CPU this process may use. Between parallel regions, the threads of torch's OpenMP
pool (GNU OpenMP in torch's Linux wheels) spin before they sleep; on a machine where other jobs take CPUs, spinning
threads take the CPU from the threads that have work. Measured on two cores with the demo config (a run of 30
steps on an idle machine; of 10 steps beside two busy processes, start-up included in both):

| idle threads | idle machine | two busy processes |
|---|---|---|
| spin 300,000 rounds (OpenMP's default) | 34.1 s | 50.9 s |
| spin 100,000 rounds (stackrl's default) | 34.5 s | 37.8 s |
| sleep at once (``OMP_WAIT_POLICY=PASSIVE``) | 44.9 s | 27.9 s |

so stackrl bounds the spinning where the user has not chosen (``GOMP_SPINCOUNT``, ``OMP_WAIT_POLICY``): no cost on
an idle machine, a quarter less time on a busy one; ``OMP_WAIT_POLICY=PASSIVE`` is the better choice on a machine
known to be shared.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
SPIN_ROUNDS = "100000"


def bound_idle_spinning() -> None:
    """Let idle OpenMP threads spin ``SPIN_ROUNDS`` rounds before they sleep, unless the user chose a policy."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_ROUNDS)


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs this process may use: those it may run on, fewer where its cgroup caps its CPU time (a container)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()
        return max(1, min(cpus, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):  # no cgroup v2 file, or a quota of "max"
        return cpus


def set_threads(requested: int | None) -> None:
    """Compute with ``requested`` torch threads; ``None``: ``OMP_NUM_THREADS`` where it is set, else one per CPU."""
    import torch

    if requested is None and "OMP_NUM_THREADS" in os.environ:
        return  # torch read it when it started
    torch.set_num_threads(requested or available_cpus())
