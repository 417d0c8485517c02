"""Sandboxed execution of model-written programs and SQL (docs/hooks.md, "Sandboxed execution").

``Sandbox`` runs Python programs one process group per run, isolated by bubblewrap (no network, a read-only
filesystem but the run's folder) or refused where isolation cannot be had, under CPU, memory, file, process and
output limits, always killed and reaped; ``run_tests`` judges a program test by test; ``Session`` keeps an
interpreter's state across turns; ``SqlDatabase`` answers read-only SQL under a time limit.
"""

from stackrl.blocks.sandbox.execution import ExecResult, Limits
from stackrl.blocks.sandbox.pool import Sandbox

__all__ = ["ExecResult", "Limits", "Sandbox"]
