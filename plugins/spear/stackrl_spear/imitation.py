"""SPEAR's self-imitation term: the clipped policy-gradient surrogate on replayed rows, their ratio taken against
the policy that sampled them and their advantage recalibrated against the buffer's baseline."""

from __future__ import annotations

import torch


def clipped_surrogate(policy_logps: torch.Tensor, behaviour_logps: torch.Tensor, advantages: torch.Tensor,
                      mask: torch.Tensor, clip_low: float, clip_high: float) -> torch.Tensor:
    """-min(r A, clip(r, 1 - low, 1 + high) A), r = exp(policy - behaviour) per token, averaged over ``mask``'s
    tokens; ``advantages`` ``(B,)``, the log-probs and ``mask`` ``(B, T)``. 0 (with gradient) without tokens."""
    ratio = torch.exp(policy_logps - behaviour_logps.detach())
    adv = advantages.to(policy_logps.dtype).unsqueeze(1)
    loss = -torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv)
    mask = mask.to(policy_logps.dtype)
    return (loss * mask).sum() / mask.sum().clamp(min=1.0)


def padded(rows: list[list[float]], width: int, like: torch.Tensor) -> torch.Tensor:
    """Per-row log-prob lists as a ``(len(rows), width)`` tensor, 0 past each row's end."""
    out = torch.zeros(len(rows), width, dtype=like.dtype, device=like.device)
    for i, row in enumerate(rows):
        n = min(len(row), width)
        out[i, :n] = torch.tensor(row[:n], dtype=like.dtype, device=like.device)
    return out
