"""PAG's per-segment rewards, and what they say about the policy as a verifier."""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.turns import ANSWER, VERIFY  # the kinds of a trajectory's segments


def segment_rewards(kinds: Sequence[str], outcomes: Sequence, shaping: float) -> list[float]:
    """One reward per segment of a trajectory, in order.

    ``outcomes[k]`` is, for an answer, whether it is right; for a verification, its verdict (True: "correct",
    False: "wrong", None: none). An answer earns its correctness, plus ``shaping`` times the change from the answer
    before it; a verification earns 1 when its verdict matches the correctness of the answer it checked, else 0.
    """
    rewards, previous = [], None
    for kind, outcome in zip(kinds, outcomes, strict=True):
        if kind == ANSWER:
            value = float(outcome)
            rewards.append(value if previous is None else value + shaping * (value - previous))
            previous = value
        else:
            rewards.append(float(outcome is not None and previous is not None and outcome == bool(previous)))
    return rewards


def verifier_figures(correct: Sequence[bool], verdicts: Sequence) -> dict[str, float]:
    """The first verification as a classifier of the first answer, "correct" the positive class (as the authors):
    ``precision`` = P(right | judged correct), ``recall`` = P(judged correct | right), ``recall_negative`` =
    P(judged wrong | wrong); a missing verdict counts as not "correct" and not "wrong". Figures without a
    denominator are left out."""
    said_correct = [v is True for v in verdicts]
    said_wrong = [v is False for v in verdicts]
    figures = {}
    true_positive = sum(c and s for c, s in zip(correct, said_correct))
    if any(said_correct):
        figures["precision"] = true_positive / sum(said_correct)
    if any(correct):
        figures["recall"] = true_positive / sum(correct)
    if not all(correct):
        figures["recall_negative"] = sum(not c and s for c, s in zip(correct, said_wrong)) / sum(not c for c in correct)
    return figures
