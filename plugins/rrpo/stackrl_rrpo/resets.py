"""Reset points that need to read an attempt: the oracle's first wrong line of the built-in task, and the step a
judge reply in the built-in task's format marks wrong (SRPO's self-localisation).

A reset point is the index of the step a continuation starts from (see :func:`stackrl.blocks.roles.reset_prompt`); the
random chooser is :func:`stackrl.blocks.roles.uniform_reset`.
"""

from __future__ import annotations

import random
import re

from stackrl.rewards import answer_after_phrase
from stackrl.tasks import VERDICT_PREFIX, parse_verdict

_STEP = re.compile(r"^\s*(-?\d+)\s*([-+*])\s*(-?\d+)\s*=\s*(-?\d+)\s*$")
_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def first_wrong_line(steps: list[str], rng: random.Random | None = None) -> int | None:
    """The first line of a built-in-task attempt that is wrong in itself: a step ``a op b = c`` whose result is
    not ``a op b``, a final "The answer is X" that is not the last step's result, or a line that is neither.

    ``None`` when every line holds (the attempt went wrong by its choice of operands, which no single line shows).
    ``rng`` is unused: the signature is a reset chooser's.
    """
    last = None
    for index, line in enumerate(steps):
        step = _STEP.match(line)
        if step is not None:
            a, op, b, result = int(step[1]), step[2], int(step[3]), int(step[4])
            if _APPLY[op](a, b) != result:
                return index
            last = result
            continue
        answer = answer_after_phrase(line)
        if answer is None or answer != str(last):
            return index
        return None
    return None


def judged_wrong_step(reply: str, steps: int) -> int | None:
    """The step of an attempt of ``steps`` lines that a judge reply marks wrong, or ``None``.

    A reply in the built-in task's judge format (``stackrl.tasks.judge_prompt``) redoes the attempt's lines one by
    one up to the first wrong one, then gives its verdict: with the verdict "wrong", the last line redone is the
    step it found wrong. A "correct" or missing verdict, or a count of lines the attempt does not have, gives none.
    """
    if parse_verdict(reply) is not False:
        return None
    redone = [line for line in reply.split(VERDICT_PREFIX.strip())[0].splitlines() if line.strip()]
    index = len(redone) - 1
    return index if 0 <= index < steps else None
