"""The round's filter (the authors' ``utils.concatenate``): each seat's score under the objective, the cutoff, the
kept seats. Pure functions of plain numbers, so that a test checks them by hand."""

from __future__ import annotations


def seat_score(returns: list[float], seat: int, objective: str) -> float:
    """A seat's score from its episode's returns (one per seat): its own ("self"), every seat's sum ("coop"), or its
    own less the others' ("comp")."""
    own = returns[seat]
    if objective == "self":
        return own
    if objective == "coop":
        return sum(returns)
    return own - (sum(returns) - own)


def cutoff(scores: list[float], filter: str) -> float | None:
    """The score a kept seat must exceed: the mean of the round's scores ("above_avg"), 0 ("nonzero"); None keeps
    every seat ("all")."""
    if filter == "above_avg":
        return sum(scores) / len(scores) if scores else 0.0
    if filter == "nonzero":
        return 0.0
    return None


def kept(scores: list[float], deals: list[bool], objective: str, filter: str) -> list[bool]:
    """Whether each seat of the round is imitated: its score strictly above the cutoff; under "comp" also a seat at
    score 0 whose episode reached a deal (an even split)."""
    bar = cutoff(scores, filter)
    return [bar is None or score > bar or (objective == "comp" and score == 0 and deal)
            for score, deal in zip(scores, deals)]
