"""Sandboxed execution of model-written programs and SQL (docs/hooks.md, "Sandboxed execution").

``Sandbox`` runs Python programs one process group per run, isolated by bubblewrap or unshare (no network, a
read-only filesystem but the run's folder) or refused where isolation cannot be had, under CPU, memory, file,
process and output limits, always killed and reaped, one at a time or a batch on a bounded pool; ``run_tests``
judges a program test by test; ``Session`` keeps an interpreter's state across turns; ``SqlDatabase`` answers
read-only SQL under a time limit and ``analyze`` reads a query's parts; ``measured_once`` computes a measurement
(run times) on the main process and hands it to every process.
"""

from stackrl.blocks.sandbox.execution import STOPS, ExecResult, Limits, program_of
from stackrl.blocks.sandbox.pool import Sandbox, check_isolation
from stackrl.blocks.sandbox.session import CellResult, Session
from stackrl.blocks.sandbox.shared import measured_once
from stackrl.blocks.sandbox.sql import SqlAnalysis, SqlDatabase, SqlResult, analyze, same_rows
from stackrl.blocks.sandbox.testcases import CaseResult, IOCase, passed_share, run_tests

__all__ = [
    "STOPS", "CaseResult", "CellResult", "ExecResult", "IOCase", "Limits", "Sandbox", "Session", "SqlAnalysis",
    "SqlDatabase", "SqlResult", "analyze", "check_isolation", "measured_once", "passed_share", "program_of", "run_tests", "same_rows",
]
