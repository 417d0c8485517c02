"""SEC's bandit over problem categories: each category's reward, the value update and the draw probabilities."""

from __future__ import annotations

import math

import torch


def category_rewards(categories: list, advantages: torch.Tensor, completion_mask: torch.Tensor) -> dict:
    """Each category's reward in one batch: the mean over its completions of the token-mean |advantage|.

    ``advantages`` is ``(N,)`` or ``(N, T)`` (``completion_mask`` ``(N, T)`` marks the real tokens); a large
    |advantage| means the policy's completions of that category still differ in reward, so it is learning there.
    """
    if advantages.dim() == 1:
        per_completion = advantages.abs()
    else:
        mask = completion_mask.to(advantages.dtype)
        per_completion = (advantages.abs() * mask).sum(1) / mask.sum(1).clamp(min=1)
    sums, counts = {}, {}
    for category, value in zip(categories, per_completion.tolist(), strict=True):
        sums[category] = sums.get(category, 0.0) + value
        counts[category] = counts.get(category, 0) + 1
    return {category: sums[category] / counts[category] for category in sums}


def updated_values(values: dict, rewards: dict, alpha: float, absent_toward_zero: bool) -> dict:
    """``Q(c) <- alpha * r(c) + (1 - alpha) * Q(c)`` for every category of the batch; a category absent from it
    takes ``r = 0`` (``absent_toward_zero``) or keeps its value."""
    new = {}
    for category, value in values.items():
        if category in rewards:
            new[category] = alpha * rewards[category] + (1 - alpha) * value
        else:
            new[category] = (1 - alpha) * value if absent_toward_zero else value
    return new


def draw_probabilities(values: dict, temperature: float) -> dict:
    """The softmax of the values at ``temperature``: the probability of drawing each category for a problem."""
    top = max(values.values())
    weights = {category: math.exp((value - top) / temperature) for category, value in values.items()}
    total = sum(weights.values())
    return {category: weight / total for category, weight in weights.items()}
