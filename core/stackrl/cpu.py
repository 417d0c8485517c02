"""How many threads torch computes with in a run on the CPU.

The default is one per CPU this process may use. Idle threads of torch's OpenMP pool sleep rather than spin
(``OMP_WAIT_POLICY=PASSIVE``, set when stackrl is imported, unless already set): spinning threads stall a run on
a machine where other jobs take CPUs. On two busy cores, a step of the built-in model with two spinning threads
took 8 to 13 times as long as with one thread; with two sleeping threads, about as long. With the other jobs held
back, two threads took 0.7 times as long as one, whether they spin or sleep.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


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
