"""The multi-turn rollout's second half: feedback on each failed first attempt, a second attempt after it, and the
advantage the self-distillation term weighs that second attempt by."""

from __future__ import annotations

from stackrl.tasks.roles import judge_reply


def critic_feedback(attempt: str) -> str | None:
    """The rule critic's feedback on ``attempt``: the check a perfect judge writes (each line worked out afresh
    from the operands the attempt wrote, up to the first wrong one, then the verdict); ``None`` for an attempt not
    in the built-in task's solution format, which the rule cannot read."""
    try:
        return judge_reply(attempt.strip())
    except (ValueError, IndexError):
        return None


def second_attempt_advantages(first_correct: list, second_correct: dict[int, bool], group_size: int) -> dict[int, float]:
    """The self-distillation advantage of each second attempt: its reward less the mean reward of its group's first
    attempts, ``r2 - mean_group(r1)`` (the authors' first-turn baseline).

    ``first_correct`` holds each row's first-attempt correctness (``None``: not judged, no answer or not a
    solution; left out of the mean); ``second_correct`` maps each retried row to its second attempt's correctness.
    """
    advantages = {}
    for row, right in second_correct.items():
        start = row - row % group_size
        judged = [float(c) for c in first_correct[start : start + group_size] if c is not None]
        advantages[row] = float(right) - sum(judged) / len(judged)
    return advantages
