"""Running a program's tests, each in a run of its own, with a verdict per test.

A test is either assertion code (a ``str``) run after the program, in the same module, or an :class:`IOCase`
(stdin and the stdout expected). A test passes only when its run ended by itself with the code run to its end
(:attr:`ExecResult.completed <stackrl.blocks.sandbox.execution.ExecResult>`: no exception, no ``sys.exit`` or
``os._exit``), exit status 0, and, for an ``IOCase``, the expected output: a program that exits early with status
0 passes nothing. Each test is a run of its own, so one test's failure, state or timeout does not reach another.
The report that the code ran to its end comes from the same process as the program, through an inherited pipe: a
program written to forge it could; an ``IOCase``'s output is compared by the trainer, so none can.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrl.blocks.sandbox.execution import ExecResult
from stackrl.blocks.sandbox.pool import Sandbox


@dataclass(frozen=True)
class IOCase:
    """A test by input and output: the program reads ``stdin`` and must print ``expected`` (compared line by line,
    trailing spaces and trailing empty lines ignored)."""

    stdin: str
    expected: str


@dataclass(frozen=True)
class CaseResult:
    """One test's verdict. ``reason`` is ``passed``, ``failed`` (it raised: ``error`` names the exception),
    ``exited_early`` (an exit call before the end), ``wrong_output``, or the run's ``stopped`` when the sandbox
    stopped it (``timeout``, ``cpu_limit``, ``memory_limit``, ``output_limit``, ``signal``)."""

    test: str | IOCase
    passed: bool
    reason: str
    error: str | None
    result: ExecResult


def run_tests(sandbox: Sandbox, program: str, tests: list, **limits) -> list[CaseResult]:
    """Each of ``tests`` against ``program`` (one sandboxed run each, on the sandbox's pool), in order; ``limits``
    (``timeout_s``, ``cpu_s``, ``memory_mb``) apply to each run."""
    return sandbox.map(lambda test: _one(sandbox, program, test, limits), list(tests))


def passed_share(results: list[CaseResult]) -> float:
    """The share of tests passed (0 for no tests)."""
    return sum(result.passed for result in results) / len(results) if results else 0.0


def _one(sandbox: Sandbox, program: str, test, limits: dict) -> CaseResult:
    if isinstance(test, IOCase):
        result = sandbox.run(program, test.stdin, **limits)
    elif isinstance(test, str):
        result = sandbox.run(f"{program.rstrip()}\n\n{test}\n", **limits)
    else:
        raise TypeError(f"run_tests: a test is assertion code (str) or an IOCase, not {type(test).__name__}")
    error = None
    if result.stopped != "exited":
        reason = result.stopped
    elif not result.completed:
        error = _exception(result.stderr)
        reason = "failed" if error else "exited_early"
    elif result.exit_code != 0:
        reason = "exited_early"
    elif isinstance(test, IOCase) and _lines(result.stdout) != _lines(test.expected):
        reason = "wrong_output"
    else:
        reason = "passed"
    return CaseResult(test=test, passed=reason == "passed", reason=reason, error=error, result=result)


def _exception(stderr: str) -> str | None:
    """The exception's name on a traceback's last line, or ``None`` when there is no traceback."""
    if "Traceback (most recent call last):" not in stderr:
        return None
    last = stderr.rstrip().rsplit("\n", 1)[-1]
    return last.split(":", 1)[0].strip() or None


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
