"""A reset point that needs to read an attempt: the oracle's first wrong line of the built-in task. The step a judge
reply marks wrong (SRPO's self-localisation) is the task's :func:`stackrl.tasks.judged_wrong_step`.

A reset point is the index of the step a continuation starts from (see :func:`stackrl.blocks.roles.reset_prompt`); the
random chooser is :func:`stackrl.blocks.roles.uniform_reset`.
"""

from __future__ import annotations

import random
import re

from stackrl.rewards import answer_after_phrase

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
