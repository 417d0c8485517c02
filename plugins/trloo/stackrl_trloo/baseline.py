"""The leave-one-out advantage: each completion's reward minus the mean reward of the others of its group."""

from __future__ import annotations

import torch


def leave_one_out(rewards: torch.Tensor, group_size: int, *, lone: str = "reward") -> torch.Tensor:
    """``(N,)`` advantages from ``(N,)`` rewards, groups of ``group_size`` consecutive rows.

    A scored row gets ``r_i − (Σ_j r_j − r_i) / (n − 1)``, the sum over the ``n`` scored rows of its group, which
    is ``n / (n − 1) · (r_i − mean)``: GRPO's centred reward scaled up by what self-inclusion takes away. No division
    by the group's spread, as in the authors' estimator. NaN rewards (rows no component scored) get 0 and stay out
    of the baseline; a group with one scored row gives it its reward (``lone="reward"``, a baseline of 0) or 0.
    """
    groups = rewards.view(-1, group_size)
    scored = ~torch.isnan(groups)
    filled = torch.where(scored, groups, torch.zeros_like(groups))
    counts = scored.sum(1, keepdim=True)
    others = (filled.sum(1, keepdim=True) - filled) / (counts - 1).clamp(min=1)
    baseline = torch.where(counts > 1, others, torch.zeros_like(others) if lone == "reward" else filled)
    return torch.where(scored, filled - baseline, torch.zeros_like(filled)).flatten()
