"""SCoRe's per-attempt rewards in each stage."""

from __future__ import annotations


def attempt_rewards(first_correct: bool, second_correct: bool, stage: int, bonus: float) -> tuple[float, float]:
    """The rewards of the first and the second attempt.

    Stage I trains the second attempt alone (the first is held near the reference by the KL term instead);
    stage II rewards both, and the second earns ``bonus * (second - first)`` more: a fix is worth more than a
    kept right answer, a break costs more than a kept wrong one.
    """
    first, second = float(first_correct), float(second_correct)
    if stage == 1:
        return 0.0, second
    return first, second + bonus * (second - first)
