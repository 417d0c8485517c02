"""The built-in task's roles beyond solving: judging an attempt and repairing it.

Plugins that make the policy judge or retry build their prompts from these constants, and the roles phase of
:mod:`stackrl.tasks.pretrain` trains on exactly these formats. ``prompt`` is
the dataset prompt (the question, ending in a newline) and ``attempt`` a solution to it, without eos::

    judge prompt:   "What is (3 + 4) * 2?\\n3 + 4 = 8\\n8 * 2 = 16\\nThe answer is 16.\\nCheck:\\n"
    judge reply:    "3 + 4 = 7 | 8 no\\nVerdict: wrong"

    retry prompt:   "What is (3 + 4) * 2?\\n3 + 4 = 8\\n8 * 2 = 16\\nThe answer is 16.\\nTry again.\\n"
    retry reply:    "3 + 4 = 7\\n7 * 2 = 14\\nThe answer is 14."

A judge reply goes through the attempt's steps one by one, working each out afresh from the operands the attempt
wrote and setting the attempt's result beside it with a mark (the final line compares the last step's result with
the answer); it stops at the first pair that differs, then comes the verdict line. :func:`slip` makes the wrong
attempts a judge is trained and measured on, and some of those a repairer is trained on.
"""

from __future__ import annotations

import random
import re

from stackrl.answers import answer_after_phrase

__all__ = [
    "CORRECT",
    "CORRUPT_MARKER",
    "CORRUPT_TEMPLATE",
    "DIFFERENT",
    "JUDGE_MARKER",
    "JUDGE_TEMPLATE",
    "RETRY_INSTRUCTION",
    "RETRY_TEMPLATE",
    "SAME",
    "VERDICT_PREFIX",
    "WRONG",
    "checked_retry_prompt",
    "compare_line",
    "corrupt_prompt",
    "first_wrong_line",
    "judge_prompt",
    "judge_reply",
    "judged_wrong_step",
    "parse_verdict",
    "redone_step",
    "retry_prompt",
    "slip",
    "wrong_lines",
]

JUDGE_MARKER = "Check:"
JUDGE_TEMPLATE = "{prompt}{attempt}\n" + JUDGE_MARKER + "\n"
VERDICT_PREFIX = "Verdict: "
CORRECT, WRONG = "correct", "wrong"  # the verdict words
SAME, DIFFERENT = "yes", "no"  # the marks of a check line
RETRY_INSTRUCTION = "Try again."
RETRY_TEMPLATE = "{prompt}{attempt}\n" + RETRY_INSTRUCTION + "\n"
# The sneaky generator's prompt (SPC): a right solution, then the marker; the reply is that solution with one step
# made wrong, as slip() makes it (stackrl/arith-roles was taught it).
CORRUPT_MARKER = "Corrupt:"
CORRUPT_TEMPLATE = "{prompt}{solution}\n" + CORRUPT_MARKER + "\n"

_STEP = re.compile(r"^(\d+) ([-+*]) (\d+) = (-?\d+)$")
_FINAL = re.compile(r"^The answer is (-?\d+)\.$")
_VERDICT = re.compile(re.escape(VERDICT_PREFIX.strip()) + r"\s*(\w+)")
# Slips a hurried solver makes: off by one or two, or a lost or doubled carry.
_SLIPS = (-10, -2, -1, 1, 2, 10)


def judge_prompt(prompt: str, attempt: str) -> str:
    """The prompt asking to judge ``attempt`` at ``prompt``, as :data:`JUDGE_TEMPLATE` lays it out."""
    return JUDGE_TEMPLATE.format(prompt=prompt, attempt=attempt)


def retry_prompt(prompt: str, attempt: str) -> str:
    """The prompt asking for a new solution after ``attempt``, as :data:`RETRY_TEMPLATE` lays it out."""
    return RETRY_TEMPLATE.format(prompt=prompt, attempt=attempt)


def corrupt_prompt(prompt: str, solution: str) -> str:
    """The prompt asking to make ``solution`` to ``prompt`` wrong in one step, as :data:`CORRUPT_TEMPLATE` lays it
    out; the reply is a whole solution, one of whose lines is wrong (:func:`wrong_lines`)."""
    return CORRUPT_TEMPLATE.format(prompt=prompt, solution=solution)


def checked_retry_prompt(prompt: str, attempt: str, check: str) -> str:
    """The prompt asking for a new solution after ``attempt`` and a ``check`` of it (a judge reply): the judge
    prompt, the check, then :data:`RETRY_INSTRUCTION`; what critique-then-retry methods chain."""
    return judge_prompt(prompt, attempt) + check + "\n" + RETRY_INSTRUCTION + "\n"


def parse_verdict(reply: str) -> bool | None:
    """True for a "Verdict: correct" line in ``reply``, False for "Verdict: wrong", None when neither comes first."""
    found = _VERDICT.search(reply)
    if found is None:
        return None
    return {CORRECT: True, WRONG: False}.get(found.group(1))


def _apply(value: int, op: str, operand: int) -> int:
    return value + operand if op == "+" else value - operand if op == "-" else value * operand


def _steps(solution: str) -> tuple[list[tuple[int, str, int, int]], int]:
    """The (value, op, operand, result) steps and the final answer of a well-formed ``solution``."""
    *lines, last = solution.split("\n")
    steps = []
    for line in lines:
        match = _STEP.match(line)
        if match is None:
            raise ValueError(f"not a step line of the arithmetic task: {line!r}")
        steps.append((int(match[1]), match[2], int(match[3]), int(match[4])))
    final = _FINAL.match(last)
    if final is None:
        raise ValueError(f"not the final line of the arithmetic task: {last!r}")
    return steps, int(final[1])


def _solution(steps: list[tuple[int, str, int, int]], answer: int) -> str:
    return "\n".join([f"{v} {op} {x} = {r}" for v, op, x, r in steps] + [f"The answer is {answer}."])


def slip(solution: str, rng: random.Random) -> str:
    """``solution`` with one slip: a step's result or the final answer moved by a small amount.

    A slipped step is carried on, so the later steps are right for the wrong value and only the slipped line
    (or the final line) shows the mistake; no value goes negative.
    """
    steps, answer = _steps(solution)
    where = rng.randrange(len(steps) + 1)  # len(steps): the final answer
    for delta in rng.sample(_SLIPS, len(_SLIPS)):
        if where == len(steps):
            if answer + delta >= 0:
                return _solution(steps, answer + delta)
            continue
        slipped = steps[:where]
        value = steps[where][3] + delta
        slipped.append((*steps[where][:3], value))
        for _, op, operand, _ in steps[where + 1 :]:
            slipped.append((value, op, operand, _apply(value, op, operand)))
            value = slipped[-1][3]
        if all(step[3] >= 0 for step in slipped):
            return _solution(slipped, value)
    raise ValueError(f"no slip keeps every value of this solution non-negative: {solution!r}")


def judge_reply(attempt: str) -> str:
    """The reply a perfect judge writes for a well-formed ``attempt``: its check, then the verdict line.

    Each check line works a step of the attempt out afresh from the operands the attempt wrote, then sets the
    attempt's result beside it and marks the pair (:func:`compare_line`); the final line compares the last step's
    result with the attempt's answer. The check stops at the first pair that differs.
    """
    steps, answer = _steps(attempt)
    check = []
    for value, op, operand, result in steps:
        right = _apply(value, op, operand)
        check.append(f"{value} {op} {operand} = {compare_line(right, result)}")
        if right != result:
            return "\n".join(check + [VERDICT_PREFIX + WRONG])
    check.append(compare_line(steps[-1][3], answer))
    return "\n".join(check + [VERDICT_PREFIX + (CORRECT if answer == steps[-1][3] else WRONG)])


def judged_wrong_step(reply: str, steps: int) -> int | None:
    """The step of an attempt of ``steps`` lines that a judge reply marks wrong, or ``None``.

    A reply in the judge format redoes the attempt's lines one by one up to the first wrong one, then gives its
    verdict: with the verdict "wrong", the last line redone is the step it found wrong. A "correct" or missing
    verdict, or a count of lines the attempt does not have, gives none.
    """
    if parse_verdict(reply) is not False:
        return None
    index = len(_redone(reply)) - 1
    return index if 0 <= index < steps else None


def redone_step(reply: str, steps: int) -> tuple[int, str] | None:
    """The step a judge reply marks wrong (:func:`judged_wrong_step`) and that step written right as the reply
    worked it out beside the attempt's value: ``(index, "3 + 4 = 7")``, or ``"The answer is 14."`` where the
    wrong line is the final answer; ``None`` where no step is marked or its redone line is in neither form."""
    index = judged_wrong_step(reply, steps)
    if index is None:
        return None
    worked = _redone(reply)[-1].split(" | ")[0].strip()
    if _STEP.match(worked):
        return index, worked
    if re.fullmatch(r"-?\d+", worked):
        return index, f"The answer is {worked}."
    return None


_CHECKED_STEP = re.compile(r"^\s*(-?\d+)\s*([-+*])\s*(-?\d+)\s*=\s*(-?\d+)\s*$")


def first_wrong_line(steps: list[str], rng=None) -> int | None:
    """The first line of an attempt (its lines, as ``str.splitlines`` cuts them) that is wrong in itself: a step
    ``a op b = c`` whose result is not ``a op b``, a final "The answer is X." that is not the last step's result, or
    a line that is neither: what a programmatic checker of the task finds, with no model asked.

    ``None`` when every line holds (the attempt went wrong by its choice of operands, which no single line shows).
    ``rng`` is unused: the signature is a reset chooser's (:data:`stackrl.blocks.roles.ResetChooser`).
    """
    last = None
    for index, line in enumerate(steps):
        step = _CHECKED_STEP.match(line)
        if step is not None:
            a, op, b, result = int(step[1]), step[2], int(step[3]), int(step[4])
            if _apply(a, op, b) != result:
                return index
            last = result
            continue
        answer = answer_after_phrase(line)
        if answer is None or answer != str(last):
            return index
        return None
    return None


def _redone(reply: str) -> list[str]:
    """The check lines of a judge reply, before its verdict."""
    return [line for line in reply.split(VERDICT_PREFIX.strip())[0].splitlines() if line.strip()]


def compare_line(expected: int, written: int) -> str:
    """``"7 | 8 no"``: the value worked out, the value the attempt wrote, and whether they are equal.

    The two numbers stand side by side so that the mark is a comparison of adjacent digits, which the small
    built-in model can learn; with the worked-out value after the attempt's, it learned to copy instead.
    """
    return f"{expected} | {written} {SAME if expected == written else DIFFERENT}"


def wrong_lines(question: str, attempt: str) -> int | None:
    """How many lines of ``attempt`` are wrong in themselves (a step ``a op b = c`` whose result is not ``a op b``,
    a final answer that is not the last step's result), where ``attempt`` is a solution of ``question``'s chain:
    well formed, one step per operation of the question, each applying that operation to the question's first
    number or to the result the step before wrote. ``None`` for any other text. A corrupted solution (a
    :func:`slip`) has exactly one wrong line."""
    from stackrl.tasks.transitions import read_state

    read = read_state(question.strip().removeprefix("What is ").removesuffix("?"))
    try:
        steps, answer = _steps(attempt.strip())
    except ValueError:
        return None
    if read is None or len(steps) != len(read[1]):
        return None
    value, wrong = read[0], 0
    for (left, op, operand, result), expected in zip(steps, read[1]):
        if left != value or (op, operand) != expected:
            return None
        wrong += _apply(left, op, operand) != result
        value = result
    return wrong + (answer != value)
