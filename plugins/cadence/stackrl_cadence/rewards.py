"""CCD and LAP: the reward that gives a wrong but numerically close answer partial credit, and a right answer
a bonus for brevity within its group."""

from __future__ import annotations

import math

from stackrl.answers import extract_answer, normalise


def number(answer: str | None) -> float | None:
    """The answer as a number, or None (no answer, or not a number)."""
    if answer is None:
        return None
    try:
        value = float(normalise(str(answer)))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def proximity_credit(found: str | None, reference: str, weight: float, tolerance: float) -> float:
    """CCD's partial credit of a wrong answer: ``weight * exp(-|found - reference| / (tolerance * max(1,
    |reference|)))``, 0 where either is not a number."""
    guess, gold = number(found), number(reference)
    if guess is None or gold is None:
        return 0.0
    return weight * math.exp(-abs(guess - gold) / (tolerance * max(1.0, abs(gold))))


def brevity_bonus(lengths: list[int], correct: list[bool], weight: float) -> list[float]:
    """LAP within one group: a right completion earns ``weight * (1 - length / longest right length)``, a wrong one
    nothing; lengths in completion tokens, so the prompt's length plays no part."""
    longest = max((n for n, right in zip(lengths, correct) if right), default=0)
    return [weight * (1.0 - n / longest) if right and longest else 0.0 for n, right in zip(lengths, correct)]


def dense_rewards(completions, references, lengths, group_size, is_correct, partial_credit, tolerance, brevity):
    """Each row's reward (None where the row has no reference answer) and whether it is more than pass/fail: 1 for
    a right answer plus LAP's bonus, CCD's partial credit for a wrong one, 0 without an answer."""
    rewards: list[float | None] = []
    beyond: list[bool] = []
    for start in range(0, len(completions), group_size):
        rows = range(start, min(start + group_size, len(completions)))
        correct = [references[i] is not None and is_correct(completions[i], references[i]) for i in rows]
        bonus = brevity_bonus([lengths[i] for i in rows], correct, brevity)
        for j, i in enumerate(rows):
            if references[i] is None:
                rewards.append(None)
                beyond.append(False)
                continue
            value = 1.0 + bonus[j] if correct[j] else proximity_credit(
                extract_answer(completions[i]), references[i], partial_credit, tolerance)
            rewards.append(value)
            beyond.append(value not in (0.0, 1.0))
    return rewards, beyond
