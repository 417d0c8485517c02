"""ExIt's task buffer rules: a group's learnability, which groups give new self-iteration tasks, how tasks are
weighed for drawing, and which leave the buffer when it is full."""

from __future__ import annotations

import random

import torch

from stackrl.tasks import retry_prompt


def learnability(rewards: torch.Tensor) -> float:
    """The population variance of a group's rewards (unscored, NaN, ones left out; 0 when none is scored): for a 0/1
    reward p(1 - p), largest when half the group is right. ExIt's measure of how informative the group's starting
    point is."""
    scored = rewards[~rewards.isnan()].double()
    return float(scored.var(correction=0)) if scored.numel() else 0.0


def most_learnable(scores: list[float], count: int, floor: float) -> list[int]:
    """The indices of the ``count`` highest ``scores`` above ``floor``, highest first (ties: the earlier group)."""
    above = [i for i, score in enumerate(scores) if score > floor]
    return sorted(above, key=lambda i: (-scores[i], i))[:count]


def draw_weights(scores: dict[int, float], replay_weight: float) -> dict[int, float]:
    """Each buffered task's pool weight: ``replay_weight`` times its score over the buffer's highest (a dataset
    problem weighs 1), so the most learnable task is drawn ``replay_weight`` times as often as a dataset problem."""
    top = max(scores.values(), default=0.0)
    return {row: replay_weight * score / top if top > 0 else 0.0 for row, score in scores.items()}


def overflow(scores: dict[int, float], capacity: int) -> list[int]:
    """The buffered tasks to retire so that ``capacity`` remain: the lowest scores first (ties: the oldest row)."""
    ranked = sorted(scores, key=lambda row: (scores[row], row))
    return sorted(ranked[: max(0, len(scores) - capacity)])


def self_iteration_prompt(prompt: str, completions: list[str], rng: random.Random) -> tuple[str, int]:
    """A new task from a group: its prompt followed by one of its completions, drawn uniformly, and the retry
    instruction (docs/roles.md, "Retry"); and the index of the completion shown."""
    shown = rng.randrange(len(completions))
    return retry_prompt(prompt, completions[shown]), shown
