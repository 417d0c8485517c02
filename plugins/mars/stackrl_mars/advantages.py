"""MARS's two rules on plain lists: each turn's discounted return, then each seat's returns normalised with that
seat's own statistics over the batch."""

from __future__ import annotations

import math
from collections.abc import Sequence

from stackrl.blocks.env import discounted_returns

EPS = 1e-4  # added to a standard deviation, as GRPO's (TRL) and the host's blocks do


def seat_normalised(values: Sequence[Sequence[float]], seats: Sequence[int], scale: str = "seat") -> list[list[float]]:
    """Each row's per-turn ``values`` centred on the mean of every turn of the rows of its seat, then divided by
    that seat's standard deviation (``scale="seat"``), by the standard deviation of all centred turns of the batch
    (``"batch"``) or by nothing (``"none"``); unbiased deviations, +``EPS``. A seat with fewer than two turns in
    the batch has nothing to compare them with: its turns get 0."""
    by_seat: dict[int, list[float]] = {}
    for row, seat in zip(values, seats, strict=True):
        by_seat.setdefault(seat, []).extend(row)
    means = {seat: sum(v) / len(v) for seat, v in by_seat.items() if len(v) > 1}
    centred = [[v - means[seat] for v in row] if seat in means else [0.0] * len(row)
               for row, seat in zip(values, seats)]
    if scale == "none":
        return centred
    if scale == "seat":
        divisors = {seat: _std([v - means[seat] for v in by_seat[seat]]) + EPS for seat in means}
    else:
        pooled = [v for row, seat in zip(centred, seats) if seat in means for v in row]
        divisors = {seat: _std(pooled) + EPS for seat in means}
    return [[v / divisors[seat] for v in row] if seat in means else row for row, seat in zip(centred, seats)]


def turn_advantages(turn_rewards: Sequence[Sequence[float]], seats: Sequence[int], gamma: float,
                    scale: str = "seat") -> list[list[float]]:
    """MARS's per-turn advantages: the discounted return of each turn (the turn's reward and the seat's later
    ones), normalised within its seat (:func:`seat_normalised`)."""
    return seat_normalised(discounted_returns(turn_rewards, gamma), seats, scale)


def _std(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
