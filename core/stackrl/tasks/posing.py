"""Posing problems as a numbered list: the request that lists example problems and ends with the next number, and
the problems read back from a reply. The built-in model learned to pose problems from these requests (its pose
skill, :mod:`stackrl.tasks.skills`), and the self-instruction block (:mod:`stackrl.blocks.selfinstruct`) asks the
policy with them.
"""

from __future__ import annotations

import re

REQUEST = "Continue this list of problems with new ones, one problem per number:\n"

_ITEM = re.compile(r"(?:^|\n)[ \t]*\d+\.(?:\s+|$)")  # a numbered item's start: "7. " at the start of a line


def parse_problems(text: str, continued: bool) -> list[str]:
    """The problems of a numbered list, each with its whitespace collapsed to single spaces.

    An item runs from its number ("7. " at a line start) to the next number or the end. With ``continued`` the
    request ended with the next item's number, so the text before the first number is that item.
    """
    starts = list(_ITEM.finditer(text))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    items = [text[m.end() : end] for m, end in zip(starts, ends)]
    if continued:
        items.insert(0, text[: starts[0].start()] if starts else text)
    return [problem for problem in (" ".join(item.split()) for item in items) if problem]


def request_text(problems: list[str], request: str = REQUEST) -> str:
    """``request``, then ``problems`` as a numbered list (whitespace collapsed, a trailing colon dropped), then the
    next number: the text a written problem continues. The built-in model learned to pose problems from it
    (``stackrl/arith-skills``, with no system prompt)."""
    listed = "".join(f"{n}. {' '.join(problem.split()).rstrip(':')}\n" for n, problem in enumerate(problems, 1))
    return f"{request}{listed}{len(problems) + 1}."
