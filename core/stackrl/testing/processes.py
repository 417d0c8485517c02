"""What a test of sandboxed runs checks is gone: processes left running, children never reaped."""

from __future__ import annotations

import os
import time
from pathlib import Path


def left_running(token: str, wait_s: float = 3.0) -> list[int]:
    """The processes whose command line holds ``token`` (pass it in a run's ``argv``), once those dying have had
    ``wait_s`` to go: a pid namespace is emptied by the kernel just after its first process is reaped."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if token.encode() in Path(entry.path, "cmdline").read_bytes():
                        found.append(int(entry.name))
                except OSError:
                    continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def zombie_children() -> list[int]:
    """This process's children that have exited and were never reaped."""
    zombies = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]  # after the command name, which may hold spaces
        if state == "Z" and int(parent) == os.getpid():
            zombies.append(int(entry.name))
    return zombies
