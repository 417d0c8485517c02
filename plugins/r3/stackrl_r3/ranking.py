"""R^3's ranking reward: the samples that failed (or were cut off) ranked within their group by token entropy.

The abstract ranks "truncated or failed samples" by "token-level entropy patterns, capturing both local exploration
and global stability", and says no more. Our reading, with its two weights configurable: a sample's score is
``L - lambda * G``, where ``L`` (local exploration) is the mean entropy of its ``top_fraction`` most uncertain
tokens, the forks where it explored, and ``G`` (global stability) the mean entropy over all its tokens, high where
the whole sample wandered.
"""

from __future__ import annotations

import math

import torch


def structural_scores(entropy: torch.Tensor, mask: torch.Tensor, *, top_fraction: float,
                      stability_weight: float) -> torch.Tensor:
    """``L - stability_weight * G`` of each row of ``entropy`` ``(N, T)`` over its ``mask``ed tokens, ``(N,)``;
    0 for a row without tokens."""
    scores = []
    for row, keep in zip(entropy, mask.bool()):
        values = row[keep]
        if not len(values):
            scores.append(0.0)
            continue
        top = values.topk(max(1, math.ceil(top_fraction * len(values)))).values
        scores.append((top.mean() - stability_weight * values.mean()).item())
    return torch.tensor(scores)


def ranking_rewards(scores: torch.Tensor, correct: list[bool], group_size: int, scale: float) -> list[float]:
    """Per row: ``scale`` for a success; for the ``k`` failed rows of a group, ``scale * r / k`` by the rank ``r``
    (0 the lowest score) of their score among themselves, so every failure stays below every success and the failures
    of an all-fail group differ. Ties keep row order."""
    rewards = [scale if ok else 0.0 for ok in correct]
    for start in range(0, len(correct), group_size):
        failed = [i for i in range(start, start + group_size) if not correct[i]]
        for rank, i in enumerate(sorted(failed, key=lambda i: scores[i].item())):
            rewards[i] = scale * rank / len(failed)
    return rewards
