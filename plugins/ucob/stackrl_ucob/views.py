"""UCOB's credit-aware comparison of the two views of one prompt (the anchor state of a one-turn task).

A group's rows are split into a plain view (the prompt alone) and a skill view (a retrieved skill before it). The
view whose mean return is higher by more than ``margin`` is the local teacher: its best rows (at most
``max_pairs``) are distilled into the other view's context, each weighted ``min(gap / tau, weight_max)`` by its
return gap over the other view's mean. Within ``margin`` nothing is distilled. The teacher may be either view: a
skill that misleads makes the plain view teach the skill view.
"""

from __future__ import annotations

from dataclasses import dataclass

SKILL, PLAIN = "skill", "plain"


@dataclass
class GroupComparison:
    """One group's two views: their mean returns and the teacher view (``None``: within the margin, or one view
    only)."""

    skill_mean: float | None
    plain_mean: float | None
    teacher: str | None


def distillation_weight(gap: float, tau: float, weight_max: float) -> float:
    """``min(max(gap / tau, 0), weight_max)``: a larger return gap teaches harder, up to ``weight_max``."""
    return min(max(gap / tau, 0.0), weight_max)


def compare_views(returns: list[float], views: list[str], group_size: int, *, margin: float, tau: float,
                  weight_max: float, max_pairs: int) -> tuple[list[float], list[GroupComparison]]:
    """Each row's distillation weight (0: not distilled) and each group's comparison, for ``returns`` and
    ``views`` (``"skill"`` or ``"plain"`` per row) of consecutive groups of ``group_size``."""
    weights = [0.0] * len(returns)
    groups = []
    for start in range(0, len(returns), group_size):
        rows = range(start, start + group_size)
        by_view = {view: [i for i in rows if views[i] == view] for view in (SKILL, PLAIN)}
        means = {view: sum(returns[i] for i in r) / len(r) if r else None for view, r in by_view.items()}
        if not by_view[SKILL] or not by_view[PLAIN] or abs(means[SKILL] - means[PLAIN]) <= margin:
            groups.append(GroupComparison(means[SKILL], means[PLAIN], None))
            continue
        teacher = SKILL if means[SKILL] > means[PLAIN] else PLAIN
        baseline = means[PLAIN if teacher == SKILL else SKILL]
        best = sorted(by_view[teacher], key=lambda i: -returns[i])[:max_pairs]
        for i in best:
            gap = returns[i] - baseline
            if gap > margin:
                weights[i] = distillation_weight(gap, tau, weight_max)
        groups.append(GroupComparison(means[SKILL], means[PLAIN], teacher))
    return weights, groups
