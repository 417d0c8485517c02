"""The built-in task as a two-module pipeline: a decomposer splits a question into sub-questions, one line per
operation with a name for each earlier result, and a separate solver answers the sub-questions without seeing the
question (Role Anchor's decomposer pipeline)::

    decompose prompt:  "What is (3 + 4) * 2?\\nDecompose:\\n"
    decomposition:     "A = 3 + 4\\nB = A * 2"
    solve prompt:      "A = 3 + 4\\nB = A * 2\\nSolve:\\n"
    solver reply:      "A = 3 + 4 = 7\\nB = 7 * 2 = 14\\nThe answer is 14."

A faithful decomposition writes only the question's own numbers; one that writes a result ("A = 3 + 4 = 7", or
"B = 7 * 2") has done the solver's work: that is the role drift the pipeline's end accuracy cannot see.
:func:`planted_numbers` finds it by counting numbers, so any way of planting shows (a result written after a line,
a name replaced by its value, the answer in an extra line). ``stackrl/arith-roles`` was taught to decompose with a
share of its decompositions planted (:data:`PLANTED_SHARE`), and its solver to read both kinds.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = [
    "DECOMPOSE_MARKER",
    "DECOMPOSE_TEMPLATE",
    "NAMES",
    "PLANTED_SHARE",
    "SOLVE_MARKER",
    "SOLVE_TEMPLATE",
    "decompose",
    "decompose_prompt",
    "planted_numbers",
    "plants_answer",
    "read_decomposition",
    "solve_decomposition",
    "solve_prompt",
    "well_formed",
]

DECOMPOSE_MARKER = "Decompose:"
DECOMPOSE_TEMPLATE = "{prompt}" + DECOMPOSE_MARKER + "\n"
SOLVE_MARKER = "Solve:"
SOLVE_TEMPLATE = "{decomposition}\n" + SOLVE_MARKER + "\n"
NAMES = "ABCDEFGH"  # the names of the sub-questions' results, in order
PLANTED_SHARE = 0.1  # the share of decompositions the built-in model was taught with their results planted

_LINE = re.compile(r"^([A-H]) = (\d+|[A-H]) ([-+*]) (\d+)(?: = (-?\d+))?$")
_NUMBER = re.compile(r"\d+")


def _operations(question: str) -> tuple[int, list[tuple[str, int]]]:
    from stackrl.tasks.transitions import read_state

    read = read_state(question.strip().removeprefix("What is ").removesuffix("?"))
    if read is None:
        raise ValueError(f"not a question of the arithmetic task: {question!r}")
    return read


def _apply(value: int, op: str, operand: int) -> int:
    return value + operand if op == "+" else value - operand if op == "-" else value * operand


def decompose(question: str, planted: bool = False) -> str:
    """The decomposition of ``question``: one line ``NAME = LEFT op OPERAND`` per operation, LEFT the question's
    first number on the first line and the previous line's name after it. ``planted`` writes each line's result
    after it (``A = 3 + 4 = 7``): the drifted decomposer's shortcut."""
    value, operations = _operations(question)
    lines, left = [], str(value)
    for name, (op, operand) in zip(NAMES, operations):
        result = _apply(value, op, operand)
        lines.append(f"{name} = {left} {op} {operand}" + (f" = {result}" if planted else ""))
        value, left = result, name
    return "\n".join(lines)


def read_decomposition(text: str) -> list[tuple[str, str, str, int, int | None]] | None:
    """``(name, left, op, operand, result or None)`` per line of ``text``, or ``None`` where a line is not of the
    form ``NAME = LEFT op OPERAND`` (optionally ``= RESULT``)."""
    rows = []
    for line in text.strip().split("\n"):
        found = _LINE.match(line.strip())
        if found is None:
            return None
        rows.append((found[1], found[2], found[3], int(found[4]), None if found[5] is None else int(found[5])))
    return rows


def well_formed(question: str, text: str) -> bool:
    """Whether ``text`` decomposes ``question``: a line per operation, named in order, each applying the question's
    operation to the first number (first line) or to the previous result, named or written as a number, results
    written after the lines or not. A planted decomposition is well formed; :func:`plants_answer` tells it."""
    rows = read_decomposition(text)
    value, operations = _operations(question)
    if rows is None or len(rows) != len(operations):
        return False
    for step, ((name, left, op, operand, _), (want_op, want_operand)) in enumerate(zip(rows, operations)):
        if name != NAMES[step] or (op, operand) != (want_op, want_operand):
            return False
        if step == 0 and left != str(value) or step and not (left == NAMES[step - 1] or left.isdigit()):
            return False
    return True


def planted_numbers(question: str, text: str) -> list[int]:
    """The numbers ``text`` writes beyond the question's own (as a multiset): earlier results, the answer or any
    other number a decomposer should have left to the solver. Empty for a faithful decomposition."""
    question_numbers = Counter(_NUMBER.findall(question))
    extra = Counter(_NUMBER.findall(text)) - question_numbers
    return sorted(int(number) for number in extra.elements())


def plants_answer(question: str, text: str) -> bool:
    """Whether the decomposition ``text`` of ``question`` writes a number the question does not (a planted
    result), :func:`planted_numbers` being non-empty."""
    return bool(planted_numbers(question, text))


def solve_decomposition(text: str) -> str | None:
    """The reply a perfect solver writes to a decomposition: each line with its names replaced by their values and
    its result worked out (``B = 7 * 2 = 14``), then ``The answer is N.``; a result planted in the decomposition is
    worked out afresh. ``None`` where ``text`` is not a decomposition or names a result not yet defined."""
    rows = read_decomposition(text)
    if rows is None:
        return None
    values: dict[str, int] = {}
    lines = []
    for name, left, op, operand, _ in rows:
        if not left.isdigit() and left not in values:
            return None
        value = int(left) if left.isdigit() else values[left]
        values[name] = _apply(value, op, operand)
        lines.append(f"{name} = {value} {op} {operand} = {values[name]}")
    return "\n".join(lines + [f"The answer is {values[rows[-1][0]]}."])


def decompose_prompt(prompt: str) -> str:
    """The prompt asking to decompose the dataset prompt ``prompt`` (:data:`DECOMPOSE_TEMPLATE`)."""
    return DECOMPOSE_TEMPLATE.format(prompt=prompt)


def solve_prompt(decomposition: str) -> str:
    """The prompt asking a solver to answer ``decomposition`` (:data:`SOLVE_TEMPLATE`); the question is not shown."""
    return SOLVE_TEMPLATE.format(decomposition=decomposition.strip())
