"""Pivotal-aware credit: a retried failure's correct prefix is credited apart from its erroneous suffix.

For a failed first attempt whose pivot is line ``k`` (token spans of its lines, ``spans``): the tokens of lines
``0 .. k-1`` (the prefix its retries kept) get the prefix credit, the tokens of line ``k`` on (the pivot and the
suffix) keep the failure's own advantage, negative where the group did better. The retries themselves are trained
on the question and the prefix, so their advantage falls on their new suffix alone; every other row keeps its own.

Prefix credit (``mode``):

- ``retry``: ``max(0, mean advantage of the retries continuing that prefix)``: the prefix is part of each retried
  trajectory, rewarded when the trajectories that go on from it do better than the group, never blamed;
- ``zero``: 0, the prefix isolated from both outcomes;
- ``outcome``: the failure's own advantage, as plain GRPO (no split).
"""

from __future__ import annotations

import torch


def row_values(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each row's advantage: ``(N,)`` as it is, or the mean over a row's real tokens of ``(N, T)``."""
    if advantages.dim() == 1:
        return advantages
    return (advantages * mask).sum(1) / mask.sum(1).clamp(min=1)


def prefix_end(spans: list[tuple[int, int]], pivot: int) -> int:
    """The token where line ``pivot`` starts: the end of the prefix of lines before it (0 for no prefix)."""
    before = spans[: max(pivot, 0)]
    return before[-1][1] if before else 0


def pivotal_credit(advantages: torch.Tensor, mask: torch.Tensor, spans: list[list[tuple[int, int]]],
                   pivots: list[int], retry_of: list[int], mode: str) -> tuple[torch.Tensor, int]:
    """``(N, T)`` advantages with each retried failure's prefix credited by ``mode``, and the number of prefix tokens
    whose advantage changed.

    ``advantages``: ``(N,)`` or ``(N, T)``; ``mask``: ``(N, T)`` real completion tokens; ``spans[i]``: row ``i``'s
    line spans; ``pivots[i]``: the pivotal line of row ``i`` if it is a failed first attempt with a pivot, else -1;
    ``retry_of[i]``: the row that retry row ``i`` continues, else -1.
    """
    width = mask.size(1)
    out = advantages[:, None].expand(-1, width).clone() if advantages.dim() == 1 else advantages.clone()
    if mode == "outcome":
        return out, 0
    values = row_values(advantages, mask)
    changed = 0
    for row, pivot in enumerate(pivots):
        if pivot < 0:
            continue
        end = prefix_end(spans[row], pivot)
        if not end:
            continue
        credit = 0.0
        if mode == "retry":
            retries = [values[r].item() for r, source in enumerate(retry_of) if source == row]
            credit = max(0.0, sum(retries) / len(retries)) if retries else 0.0
        before = out[row, :end].clone()
        out[row, :end] = credit
        changed += int(((out[row, :end] != before) & mask[row, :end].bool()).sum())
    return out, changed


def reflection_returns(reflections: list, retry_of: list[int], success: list[bool], group_size: int):
    """The implicit return of each trained reflection and its advantage against its group's other reflections.

    ``reflections[i]``: the token span of row ``i``'s reflection, or ``None``; ``retry_of[i]``: the row retry row
    ``i`` continues, else -1; ``success[i]``: whether row ``i`` reached the answer. A reflection's return is the share
    of the retries continuing its row (from the pivot it found) that succeed, 0 where there are none (it found no
    pivot, or none got a retry slot). Within a group, each return is centred on the mean of the group's reflections'
    returns and divided by their standard deviation + 1e-4 (GRPO's); a reflection alone in its group gets 0.
    Returns ``({row: return}, {row: advantage})``.
    """
    returns = {}
    for row, span in enumerate(reflections):
        if span is None:
            continue
        retries = [success[r] for r, source in enumerate(retry_of) if source == row]
        returns[row] = sum(retries) / len(retries) if retries else 0.0
    values = {}
    for start in range(0, len(reflections), group_size):
        rows = [r for r in returns if start <= r < start + group_size]
        if len(rows) < 2:
            values.update({r: 0.0 for r in rows})
            continue
        scores = torch.tensor([returns[r] for r in rows])
        for r, value in zip(rows, ((scores - scores.mean()) / (scores.std() + 1e-4)).tolist()):
            values[r] = value
    return returns, values
