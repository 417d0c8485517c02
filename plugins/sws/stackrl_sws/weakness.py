"""Weakness identification: which problems the policy keeps failing, and how much of the synthesis budget each
category gets.

A problem's record is the pass rate of each group drawn of it, in order (the pool's ``last_pass_rate`` after each
draw). It is a failure case when it has at least ``min_records`` records, none reaches ``max_pass_rate``, and the
least-squares slope of its record is not positive (it is not being learned). A category's failure ratio is its
failure cases over its recorded problems; the round's budget is shared out in proportion to the ratios, each share
rounded down, as the authors' concept sampling does.
"""

from __future__ import annotations


def slope(record: list[float]) -> float:
    """The least-squares slope of ``record`` against its index (0 for fewer than two points)."""
    n = len(record)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(record) / n
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(record))
    return covariance / sum((x - mean_x) ** 2 for x in range(n))


def is_failure(record: list[float], max_pass_rate: float, min_records: int) -> bool:
    """Failing throughout (every pass rate below ``max_pass_rate``) and not improving (slope <= 0)."""
    return len(record) >= min_records and max(record) < max_pass_rate and slope(record) <= 0.0


def failure_ratios(records: dict[int, list[float]], categories: dict[int, str | None], max_pass_rate: float,
                   min_records: int) -> dict[str, float]:
    """Each category's share of failure cases among its recorded problems (problems without a category left out;
    a category with no failure case is left out too)."""
    recorded: dict[str, int] = {}
    failed: dict[str, int] = {}
    for row, record in records.items():
        category = categories.get(row)
        if category is None or len(record) < min_records:
            continue
        recorded[category] = recorded.get(category, 0) + 1
        if is_failure(record, max_pass_rate, min_records):
            failed[category] = failed.get(category, 0) + 1
    return {c: failed[c] / recorded[c] for c in sorted(failed)}


def budgets(ratios: dict[str, float], total: int) -> dict[str, int]:
    """``int(total * ratio / sum(ratios))`` problems for each category (rounded down; zero shares left out)."""
    whole = sum(ratios.values())
    shares = {c: int(total * r / whole) for c, r in ratios.items()} if whole > 0 else {}
    return {c: n for c, n in shares.items() if n > 0}
