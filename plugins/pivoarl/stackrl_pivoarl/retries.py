"""Pivotal retries: where a failed attempt went wrong, and which failed attempt each retry row of a group continues.

A pivot is the index of an attempt's first wrong line (its steps, :func:`stackrl.blocks.roles.split_steps`): the
lines before it are the correct prefix, kept verbatim; a retry is a continuation sampled from the question followed
by that prefix (:func:`stackrl.blocks.roles.reset_prompt`), so it writes the pivotal line and everything after it
again.
"""

from __future__ import annotations

from stackrl.tasks import first_wrong_line, judged_wrong_step


def retry_slots(group_size: int, share: float) -> int:
    """The retry rows of a group of ``group_size``: ``share`` of it, rounded, and at least one row of each kind."""
    return min(max(round(group_size * share), 1), group_size - 1)


def assign(pivots: list[int | None], slots: int) -> list[int | None]:
    """Which first attempt each of ``slots`` retry rows continues: the attempts with a pivot (``pivots[j]`` not
    ``None``) in turn, round and round, so each gets as many retries as the slots allow; ``None`` for every slot
    when no attempt has one (those rows are fresh attempts)."""
    retried = [j for j, k in enumerate(pivots) if k is not None]
    return [retried[s % len(retried)] if retried else None for s in range(slots)]


def oracle_pivot(steps: list[str]) -> int | None:
    """The task's programmatic checker: the first line wrong in itself (``None`` where every line holds)."""
    return first_wrong_line(steps)


def reflected_pivot(reply: str, steps: list[str]) -> int | None:
    """The policy's structured reflection, a reply in the built-in task's judge format: the step its check stopped
    at with the verdict "wrong" (``None`` for "correct", no verdict or more lines than the attempt has)."""
    return judged_wrong_step(reply, len(steps))
