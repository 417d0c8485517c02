"""Timed runs of a step's programs in the sandbox: each once to judge it, then the passing ones (and the baselines)
again until each has ``repeats`` run times, in rounds, so that a burst of load falls on every program alike.

Everything here runs on one process (:func:`stackrl.blocks.sandbox.measured_once` hands the result to the
others): run times differ between processes, and rewards read from them must be the same on every one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from stackrl.blocks.sandbox import ExecResult


@dataclass
class Timed:
    """One program's runs: whether it passed (ran to a clean exit printing exactly the answer) and the time of
    each of its runs, in seconds (one for a failing program: it is not run again)."""

    passed: bool
    times: list[float] = field(default_factory=list)
    stopped: str = "exited"


@dataclass
class Measurement:
    """What one reward stage measured: a :class:`Timed` per program, in the order given, the runs made and the
    seconds they took."""

    programs: list[Timed]
    runs: int
    seconds: float


def prints(result: ExecResult, answer: str) -> bool:
    """A pass: the program ran to its end, exited with status 0 and printed exactly ``answer`` (trailing spaces and
    line breaks aside), as ``stackrl.tasks.programs.prints_answer`` judges the built-in model's programs."""
    return result.ok and result.stdout.strip() == answer.strip()


def measure(sandbox, programs: list[str], answers: list[str], *, repeats: int, timer: str, **limits) -> Measurement:
    """Run each program once and judge it against its answer, then run the passing ones ``repeats - 1`` more times,
    all of them in each round (``sandbox.run_many``: at most ``sandbox.workers`` at once)."""
    started = time.perf_counter()
    first = sandbox.run_many(programs, **limits)
    timed = [Timed(prints(result, answer), [_time(result, timer)], result.stopped)
             for result, answer in zip(first, answers)]
    again = [i for i, program in enumerate(timed) if program.passed]
    runs = len(programs)
    for _ in range(repeats - 1):
        for i, result in zip(again, sandbox.run_many([programs[i] for i in again], **limits)):
            timed[i].times.append(_time(result, timer))
        runs += len(again)
    return Measurement(timed, runs, time.perf_counter() - started)


def _time(result: ExecResult, timer: str) -> float:
    return result.cpu_s if timer == "cpu" else result.wall_s
