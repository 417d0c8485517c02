"""Measuring the built-in task's skills: solving, judging and repairing (:mod:`stackrl.tasks.roles`).

The figures are computed from generated texts, so the same code serves ``stackrl eval`` (``eval.skill``) and the
script that makes the built-in models (:mod:`stackrl.tasks.pretrain`); generating is left to the caller.

- judge: every problem is judged twice, on its solution and on a slipped copy (:func:`~stackrl.tasks.roles.slip`).
  ``balanced_accuracy`` is the mean of the share of right attempts judged correct (``right_judged_correct``) and
  of wrong ones judged wrong (``wrong_judged_wrong``); a reply without a verdict is a miss either way.
- repair: the model's own first attempts are retried with :func:`~stackrl.tasks.roles.retry_prompt`. ``fix`` is the
  share of wrong first attempts whose retry is right, ``keep`` the share of right ones whose retry stays right.
"""

from __future__ import annotations

import random

from stackrl.tasks.roles import judge_prompt, parse_verdict, retry_prompt, slip

__all__ = ["SKILLS", "judge_figures", "judge_prompts", "repair_figures", "repair_prompts"]

SKILLS = ("solve", "judge", "repair")


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def judge_prompts(prompts: list[str], solutions: list[str], seed: int = 0) -> list[str]:
    """Two judge prompts per problem: first every problem with its solution, then every one with a slipped copy
    (slips drawn from ``seed``)."""
    rng = random.Random(f"stackrl.skills.judge/{seed}")
    slipped = [slip(solution, rng) for solution in solutions]
    return [judge_prompt(p, a) for p, a in zip(prompts + prompts, solutions + slipped)]


def judge_figures(replies: list[str], categories: list[str] | None = None) -> dict:
    """Verdict figures of the replies to :func:`judge_prompts` (in its order), overall and by category."""
    n = len(replies) // 2
    verdicts = [parse_verdict(reply) for reply in replies]
    right = [v is True for v in verdicts[:n]]
    wrong = [v is False for v in verdicts[n:]]

    def figures(rows) -> dict:
        on_right, on_wrong = _mean(right[i] for i in rows), _mean(wrong[i] for i in rows)
        return {
            "balanced_accuracy": (on_right + on_wrong) / 2,
            "right_judged_correct": on_right,
            "wrong_judged_wrong": on_wrong,
        }

    result = {**figures(range(n)), "no_verdict": _mean(v is None for v in verdicts), "problems": n}
    if categories is not None:
        names = dict.fromkeys(categories)
        result["by_category"] = {c: figures([i for i in range(n) if categories[i] == c]) for c in names}
    return result


def repair_prompts(prompts: list[str], attempts: list[str]) -> list[str]:
    """The retry prompt of each first attempt."""
    return [retry_prompt(p, a) for p, a in zip(prompts, attempts)]


def repair_figures(first: list[float], second: list[float], categories: list[str] | None = None) -> dict:
    """Fix and keep rates from the correctness of first attempts and of their retries, overall and by category."""

    def figures(rows) -> dict:
        wrong = [i for i in rows if not first[i]]
        right = [i for i in rows if first[i]]
        return {
            "fix": _mean(second[i] for i in wrong),
            "keep": _mean(second[i] for i in right),
            "wrong_attempts": len(wrong),
            "right_attempts": len(right),
        }

    result = figures(range(len(first)))
    if categories is not None:
        names = dict.fromkeys(categories)
        result["by_category"] = {c: figures([i for i in range(len(first)) if categories[i] == c]) for c in names}
    return result
