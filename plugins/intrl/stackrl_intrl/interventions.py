"""Interventions: where a failed attempt first goes wrong, the step to put there instead, and the SFT target they make.

An attempt is a list of steps joined by a separator. An intervention ``(index, step)`` says that steps ``0 ..
index - 1`` stand and that ``step`` replaces step ``index`` and everything after it; the SFT target is that prefix
followed by the intervention, with nothing after it (the authors' target ends there, without eos, so the model
learns the corrected step and carries on by itself).
"""

from __future__ import annotations

import ast
import re

from stackrl.tasks import redone_step

Intervention = tuple[int, str]

_TAGGED = re.compile(r"<intervention>(.*?)</intervention>", re.DOTALL)


def steps_of(attempt: str, separator: str) -> list[str]:
    return attempt.split(separator)


def target(steps: list[str], intervention: Intervention, separator: str) -> str:
    """The prefix up to the error, then the intervention: what the SFT phase trains the policy to write."""
    index, step = intervention
    return separator.join([*steps[:index], step])


def from_reference(steps: list[str], solution: str, separator: str) -> Intervention | None:
    """The first step that differs from the reference solution's, replaced by the solution's step there: a perfect
    proposer shown the solution, for a task whose solutions take one path. ``None`` where the attempt follows the
    solution as far as it goes."""
    for index, (step, right) in enumerate(zip(steps, solution.split(separator))):
        if step.strip() != right.strip():
            return index, right
    return None


def read_check(reply: str, steps: list[str]) -> Intervention | None:
    """A judge reply of the built-in task: the step it marks wrong, written as it worked it out."""
    return redone_step(reply, len(steps))


def read_tagged(reply: str, steps: list[str]) -> Intervention | None:
    """The authors' format: the last ``<intervention>{"content": ..., "location": N}</intervention>``, N the 1-based
    step the content goes in place of. ``None`` for no block, one that does not parse, empty content, or a location
    outside the attempt."""
    blocks = _TAGGED.findall(reply)
    if not blocks:
        return None
    try:
        found = ast.literal_eval(blocks[-1].strip())
        content, location = str(found["content"]).strip(), int(found["location"])
    except (ValueError, SyntaxError, TypeError, KeyError):
        return None
    if not content or not 1 <= location <= len(steps):
        return None
    return location - 1, content


READERS = {"check": read_check, "tagged": read_tagged}
