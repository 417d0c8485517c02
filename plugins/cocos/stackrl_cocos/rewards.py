"""CoCoS's reward: each turn's program scored by the share of its tests it passes, and the accumulated reward.

The accumulated (correction) reward of a trajectory of ``T`` turns with turn scores ``r_1 .. r_T`` (``r_0 = 0``):

    R = sum_t gamma ** (T - t) * (r_t - r_{t-1})

the last turn's change weighted 1, earlier changes discounted. For two turns, ``R = gamma * r_1 + (r_2 - r_1)``:
a right first program kept right earns ``gamma``, a wrong one fixed ``1``, a right one broken ``gamma - 1`` (the
penalty), one wrong twice ``0``; ``gamma = 0`` leaves the last change alone, ``r_T - r_{T-1}``.
"""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.sandbox import IOCase, passed_share, run_tests
from stackrl.tasks.programs import write_program


def accumulated(scores: Sequence[float], gamma: float) -> float:
    """``sum_t gamma ** (T - t) * (r_t - r_{t-1})`` over the turn scores ``r_1 .. r_T``, ``r_0 = 0``."""
    total, previous, last = 0.0, 0.0, len(scores)
    for t, score in enumerate(scores, start=1):
        total += gamma ** (last - t) * (score - previous)
        previous = score
    return total


def arithmetic_tests(question: str, answer: str) -> list:
    """The built-in task's tests of a program: one assertion per line of the task's own program (the value its
    result name holds after the program), then the printed answer (an ``IOCase``). A program with a slip passes the
    lines before it: the partial credit."""
    values: dict = {}
    tests: list = []
    for line in write_program(question).splitlines()[:-1]:  # the last line prints
        name, expression = (part.strip() for part in line.split("=", 1))
        values[name] = eval(expression, {"__builtins__": {}}, dict(values))  # noqa: S307 - the task's own arithmetic
        tests.append(f"assert {name} == {values[name]!r}")
    tests.append(IOCase(stdin="", expected=str(answer)))
    return tests


def turn_score(sandbox, program: str, tests: list, *, fine_grained: bool, **limits) -> float:
    """A program's score: the share of ``tests`` it passes (``fine_grained``), else 1 when it passes all, 0 if not."""
    share = passed_share(run_tests(sandbox, program, tests, **limits))
    return share if fine_grained else float(share == 1.0)
