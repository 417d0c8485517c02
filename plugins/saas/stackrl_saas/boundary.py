"""SAAS's search boundary and its boundary-aware penalties, as pure functions of one group.

A question's *boundary label* comes from contrasting the policy's tool-free answers with its tool-enabled rows
(the group): ``no_search`` where at least ``min_correct`` tool-free answers are right (the policy knows it without
the tool), else ``need_search`` where some tool-enabled row is right, else ``undetermined``. Each right row is then
penalised ``beta`` per call beyond the question's sufficient count: 0 on a ``no_search`` question (every call is
unnecessary), the fewest calls of a right row of the group on a ``need_search`` question; an ``undetermined``
question's rows are not penalised, nor is a wrong row. A row that repeats one of its own earlier calls (the same
tool with the same arguments) loses ``repeat_penalty`` once, right or wrong.
"""

from __future__ import annotations

NO_SEARCH, NEED_SEARCH, UNDETERMINED = "no_search", "need_search", "undetermined"
LABELS = (NO_SEARCH, NEED_SEARCH, UNDETERMINED)


def boundary_label(tool_free_correct: int, rows_correct: list[bool], min_correct: int) -> str:
    """The question's label from how many tool-free answers were right and which tool-enabled rows were."""
    if tool_free_correct >= min_correct:
        return NO_SEARCH
    if any(rows_correct):
        return NEED_SEARCH
    return UNDETERMINED


def sufficient_calls(label: str, calls: list[int], rows_correct: list[bool]) -> int | None:
    """The calls a right row may make unpenalised: 0 inside the boundary, the fewest of a right row outside it;
    None where the question is undetermined."""
    if label == NO_SEARCH:
        return 0
    if label == NEED_SEARCH:
        return min(c for c, ok in zip(calls, rows_correct) if ok)
    return None


def repeats_a_call(calls: list) -> bool:
    """Whether some call equals an earlier one of the same row (``calls`` in order, each hashable)."""
    return len(set(calls)) < len(calls)


def group_penalties(label: str, calls: list[int], rows_correct: list[bool], repeated: list[bool], *, beta: float,
                    repeat_penalty: float) -> list[float]:
    """Each row's penalty (0 or negative): the boundary's on right rows, the repetition's on every row."""
    allowed = sufficient_calls(label, calls, rows_correct)
    out = []
    for c, ok, again in zip(calls, rows_correct, repeated):
        value = -beta * max(0, c - allowed) if ok and allowed is not None else 0.0
        out.append(value - (repeat_penalty if again else 0.0))
    return out
