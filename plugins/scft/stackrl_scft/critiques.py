"""SCFT's data: the policy's own critiques of its own answers, kept by the authors' correctness filter (their Eq. 3).

A row is an answer ``y``, then the critique ``c``: the check after the injected critique instruction, ending in a
verdict, and after "wrong" the injected retry instruction and a corrected solution. The critique's final answer is
that solution's after "wrong", the answer it confirms after "correct". The filter keeps ``(q, y, c)`` when the
critique ends right, ``Acc(c) = 1``, whatever ``Acc(y)``: a critique that corrects a wrong answer (``fix``, the
authors' i->c) or confirms a right one (``confirm``, c->c). With ``strict_verdict`` the verdict must also say what
the answer is, so a right answer called wrong and then rewritten right is not kept. Only the critique is trained
(the authors' Eq. 5, ``-log P(c | q, y)``): its segments, each on everything before it; the answer is context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stackrl.blocks.turns import ANSWER, VERIFY, Segment, Trajectory, segment_pairs
from stackrl.tasks import parse_verdict

FIX, CONFIRM = "fix", "confirm"


def critique_kind(first_right: bool, verdict: bool | None, final_right: bool, *, strict: bool) -> str | None:
    """The filter: ``fix`` or ``confirm`` for a kept critique (by whether the answer it critiques was right), else
    ``None``. ``verdict`` is the check's (True "correct", False "wrong", None none), ``final_right`` whether the
    critique's final answer is right."""
    if verdict is None or not final_right:
        return None
    if strict and verdict != first_right:
        return None
    return CONFIRM if first_right else FIX


def row_outcomes(segments: Sequence[Segment], answer, is_correct: Callable[[str, object], bool]):
    """A row's first answer right, its first check's verdict and its final answer right (the critique's after a
    check, else the answer's)."""
    answers = [s for s in segments if s.kind == ANSWER]
    checks = [s for s in segments if s.kind == VERIFY]
    verdict = parse_verdict(checks[0].text) if checks else None
    return is_correct(answers[0].text, answer), verdict, is_correct(answers[-1].text, answer)


def kept_critique(trajectory: Trajectory, answer, is_correct, *, strict: bool):
    """``(kind, pairs)`` for a row the filter keeps: the (context, completion) token pairs of its critique's
    segments; ``None`` for a row it drops or without a reference answer."""
    if answer is None or len(trajectory.segments) < 2:
        return None
    kind = critique_kind(*row_outcomes(trajectory.segments, answer, is_correct), strict=strict)
    if kind is None:
        return None
    first = trajectory.segments[0]
    return kind, segment_pairs(trajectory, lambda s: s != first)


def phase_rows(fixes: list, confirms: list, confirm_per_fix: float | None) -> list:
    """The kept rows a phase trains: every correcting one, and the confirming ones up to ``confirm_per_fix`` per
    correcting one (the first ones kept; ``None``: all)."""
    cap = len(confirms) if confirm_per_fix is None else int(confirm_per_fix * len(fixes))
    return fixes + confirms[:cap]
