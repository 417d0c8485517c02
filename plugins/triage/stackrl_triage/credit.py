"""TRIAGE's credit: each labelled segment's tokens get the row's outcome advantage plus its role's constant.

    A[i, t] = A_outcome[i, t] + c[role(i, k)]   for every token t of segment k of row i

The constants are fixed and bounded (``|c| <= 1``); a segment without a label (the labeller failed or left it
out) keeps the outcome advantage. The verifier's outcome advantage stays the direction of each row; the role
constant moves its segments apart inside the row: a regression in a successful row is reinforced less, useful
exploration in a failed row is punished less.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from stackrl.blocks.roles import broadcast_segments


def role_constants(labels: Sequence[Sequence[str | None]], constants: dict[str, float]) -> list[list[float]]:
    """Each segment's correction: its role's constant, 0 for a segment without a label."""
    return [[0.0 if role is None else float(constants[role]) for role in row] for row in labels]


def segment_credit(advantages: torch.Tensor, spans, corrections: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    """``(N, width)`` advantages: ``advantages`` (``(N,)`` per row or ``(N, width)`` per token) plus each segment's
    correction over its token span (``spans[i][k] = (start, end)``, end exclusive); tokens in no span keep theirs."""
    per_token = advantages if advantages.dim() == 2 else advantages[:, None].expand(-1, width)
    shift = broadcast_segments(corrections, spans, width).to(per_token)
    return per_token + shift
