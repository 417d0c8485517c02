"""What a test of sandboxed runs checks is gone: processes left running, children never reaped."""

from __future__ import annotations

import os
import time

from stackrl.blocks.sandbox.execution import proc_files


def left_running(token: str, wait_s: float = 3.0) -> list[int]:
    """The processes whose command line holds ``token`` (pass it in a run's ``argv``), once those dying have had
    ``wait_s`` to go: a pid namespace is emptied by the kernel just after its first process is reaped."""
    deadline = time.monotonic() + wait_s
    while True:
        found = [pid for pid, command in proc_files("cmdline") if token in command]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def zombie_children() -> list[int]:
    """This process's children that have exited and were never reaped."""
    zombies = []
    for pid, stat in proc_files("stat"):
        state, parent = stat.rsplit(")", 1)[1].split()[:2]  # after the command name, which may hold spaces
        if state == "Z" and int(parent) == os.getpid():
            zombies.append(pid)
    return zombies
