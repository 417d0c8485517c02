"""HRPO's advantage: each reward standardised by the mean and spread of its cluster's rewards over the batch."""

from __future__ import annotations

import torch


def cluster_advantages(rewards: torch.Tensor, keys: list, *, scale_by_std: bool = True,
                       epsilon: float = 1e-6) -> torch.Tensor:
    """``(N,)`` advantages from ``(N,)`` rewards and one cluster key a row.

    A row's advantage is ``(r - mean_c) / (std_c + epsilon)``, the mean and the Bessel-corrected standard deviation
    over the scored rows of its cluster ``c``, whatever prompt they answer (GRPO's are over its prompt's group);
    ``r - mean_c`` without ``scale_by_std``. A cluster with one scored row takes mean 0 and std 1, so that row's
    advantage is its reward (over 1 + epsilon), as in the authors' estimator. NaN rewards (rows no component
    scored) get 0 and stay out of every cluster.
    """
    advantages = torch.zeros_like(rewards, dtype=torch.float32)
    members: dict = {}
    for i, k in enumerate(keys):
        if not torch.isnan(rewards[i]):
            members.setdefault(k, []).append(i)
    for rows in members.values():
        r = rewards[rows].float()
        if len(rows) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = r.mean(), r.std()
        advantages[rows] = (r - mean) / (std + epsilon) if scale_by_std else r - mean
    return advantages


def pooled_rows(keys: list, scored: torch.Tensor, group_size: int) -> torch.Tensor:
    """Rows whose cluster holds scored rows of more than one prompt: those whose baseline is not their group's."""
    prompts: dict = {}
    for i, k in enumerate(keys):
        if scored[i]:
            prompts.setdefault(k, set()).add(i // group_size)
    return torch.tensor([bool(scored[i]) and len(prompts.get(k, ())) > 1 for i, k in enumerate(keys)])
