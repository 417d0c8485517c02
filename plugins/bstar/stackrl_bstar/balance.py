"""B-STaR's balance score and the choice of a configuration by it (arXiv 2412.17256; the authors'
``determine_hyper.py`` and ``metric_modiacc_auto.py``, hkust-nlp/B-STaR).

A query's candidates are its sampled completions, each with its text, whether its final answer is right and its
selection score. A threshold ``tau`` keeps the candidates scoring above it; of a query's kept *distinct* texts,
``n`` in all, ``n_right`` are right. The query's balance is

    min(n_right / n_star, 1) * n_right / n           (0 where nothing is kept)

(the first factor rewards enough distinct right answers: exploration; the second a selection that keeps right ones:
exploitation), and the balance score is its mean over the queries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """One sampled completion of a query: its text, whether its answer is right, its selection score."""

    text: str
    correct: bool
    score: float


def query_balance(candidates: Sequence[Candidate], threshold: float, n_star: int) -> float:
    """One query's balance: ``min(n'/n*, 1) * n'/n`` over the distinct texts scoring above ``threshold``."""
    kept: dict[str, bool] = {}
    for candidate in candidates:
        if candidate.score > threshold:
            kept[candidate.text] = kept.get(candidate.text, False) or candidate.correct
    if not kept:
        return 0.0
    right = sum(kept.values())
    return min(right / n_star, 1.0) * right / len(kept)


def balance_score(queries: Sequence[Sequence[Candidate]], threshold: float, n_star: int) -> float:
    """The mean of :func:`query_balance` over ``queries`` (each a query's candidates); 0 for no queries."""
    if not queries:
        return 0.0
    return sum(query_balance(candidates, threshold, n_star) for candidates in queries) / len(queries)


def thresholds(queries: Sequence[Sequence[Candidate]]) -> list[float]:
    """The thresholds that can keep different sets, lowest first: below every score (keep all), then each distinct
    score (keep those above it). Any finer grid's best value is one of these."""
    scores = sorted({candidate.score for candidates in queries for candidate in candidates})
    return [-math.inf] + scores[:-1] if scores else [-math.inf]


def best_threshold(queries: Sequence[Sequence[Candidate]], n_star: int) -> tuple[float, float]:
    """``(threshold, balance score)`` with the highest balance score; on a tie the lowest threshold (it keeps the
    most), as the authors' ascending sweep with a strict improvement does."""
    best, best_score = -math.inf, -math.inf
    for threshold in thresholds(queries):
        score = balance_score(queries, threshold, n_star)
        if score > best_score:
            best, best_score = threshold, score
    return best, best_score


def best_temperature(by_temperature: dict[float, Sequence[Sequence[Candidate]]], n_star: int) -> tuple[float, dict]:
    """The temperature whose samples reach the highest balance score at their own best threshold (a tie: the one
    listed first), and each temperature's ``(threshold, balance score)``."""
    found = {temperature: best_threshold(queries, n_star) for temperature, queries in by_temperature.items()}
    chosen = max(found, key=lambda temperature: found[temperature][1])
    return chosen, found
