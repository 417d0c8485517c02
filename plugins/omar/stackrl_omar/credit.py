"""OMAR's hierarchical credit: a seat's reward first split over its turns (each turn's discounted return, compared
with the same seat's same turn in the group's other episodes), then over each turn's tokens."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from stackrl.blocks.env import discounted_returns
from stackrl.blocks.turns import Segment, segment_advantages

SEAT, ALL = "seat", "all"
SPLIT, EACH = "split", "each"


def seat_segments(segments: Sequence[Sequence[Segment]], seats: Sequence[int], baseline: str) -> list[list[Segment]]:
    """Each row's action segments relabelled so that :func:`segment_advantages` compares a turn only with the same
    turn of rows of the same seat (``baseline: seat``), or of every seat (``all``)."""
    out = []
    for row, seat in zip(segments, seats, strict=True):
        kind = f"seat{seat}" if baseline == SEAT else "turn"
        out.append([s._replace(kind=kind, turn=k) for k, s in enumerate(row)])
    return out


def turn_advantages(
    turn_rewards: Sequence[Sequence[float]], seats: Sequence[int], segments: Sequence[Sequence[Segment]],
    group_size: int, width: int, *, gamma: float, baseline: str, tokens: str,
) -> torch.Tensor:
    """``(N, width)`` per-token advantages. Turn level: turn ``k`` of a row is worth its return
    ``G_k = r_k + gamma * G_{k+1}`` over the seat's own turn rewards, centred on and scaled by the group's
    ``G_k`` of the same turn of the same seat (``segment_advantages``: mean, std + 1e-4; alone in its slot: 0).
    Token level: ``split`` shares a turn's advantage evenly over its tokens (they sum to it), ``each`` gives every
    token of the turn the whole of it. Observations and padding get 0."""
    values = discounted_returns(turn_rewards, gamma)
    labelled = seat_segments(segments, seats, baseline)
    advantages = segment_advantages(values, labelled, group_size, width)
    if tokens == SPLIT:
        for row, row_segments in enumerate(labelled):
            for s in row_segments:
                if s.end > s.start:
                    advantages[row, s.start : s.end] /= s.end - s.start
    return advantages
