"""ECHO's update side, as formulas on ``(N, T)`` token tensors (``mask`` 1 on completion tokens, 0 on padding).

- token confidence ``C_t``: the mean probability of the ``k`` most likely next tokens (the policy's distribution at
  the sampling temperature), so ``topk_mass / k``;
- exploration score ``S_t = clamp(alpha * z(H_t) + beta * z(1 - C_t), -s_max, s_max)``, ``z`` the z-score over
  every completion token of the batch (unbiased variance);
- hybrid advantage ``A'_t = A * (1 + a * S_t) + lambda * (S_t - mean of S over the group's tokens)``;
- tail confidence ``C_tail``: the mean ``C_t`` over a completion's last ``tail_window`` tokens;
- clip range ``eps = eps_min + (eps_max - eps_min) * sigmoid(kappa * (1 - C_tail))``, per row, both sides.
"""

from __future__ import annotations

import torch

WHITEN_EPSILON = 1e-8  # added to the variance before its square root


def whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(values - mean) / sqrt(var + 1e-8)``, mean and unbiased variance over the masked entries."""
    mask = mask.to(values.dtype)
    count = mask.sum()
    if count < 2:
        raise ValueError(f"whiten: needs at least two masked entries, not {int(count)}")
    mean = (values * mask).sum() / count
    variance = (((values - mean) ** 2) * mask).sum() / count * count / (count - 1)
    return (values - mean) * torch.rsqrt(variance + WHITEN_EPSILON)


def exploration_score(entropy: torch.Tensor, confidence: torch.Tensor, mask: torch.Tensor, *,
                      alpha: float, beta: float, s_max: float | None) -> torch.Tensor:
    """``S_t``: high where the token's distribution is spread (entropy) and its top tokens unlikely (1 - C_t)."""
    score = alpha * whiten(entropy, mask) + beta * whiten(1.0 - confidence.clamp(0.0, 1.0), mask)
    if s_max is not None:
        score = score.clamp(-s_max, s_max)
    return score * mask


def group_token_mean(values: torch.Tensor, mask: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """``(N, 1)``: each row's group mean of ``values`` over all the group's completion tokens."""
    mask = mask.to(values.dtype)
    groups = int(group_index.max()) + 1
    totals = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, (values * mask).sum(1))
    counts = torch.zeros(groups, dtype=values.dtype).index_add_(0, group_index, mask.sum(1))
    return (totals / counts.clamp_min(1.0))[group_index].unsqueeze(1)


def hybrid_advantages(advantages: torch.Tensor, score: torch.Tensor, mask: torch.Tensor, group_index: torch.Tensor,
                      *, mult_coeff: float, add_coeff: float) -> torch.Tensor:
    """``A * (1 + a S_t) + lambda (S_t - group mean of S)``, zero on padding; ``advantages`` ``(N,)`` or ``(N, T)``."""
    mask = mask.to(score.dtype)
    shaped = (advantages.unsqueeze(1) if advantages.dim() == 1 else advantages) * mask
    if mult_coeff != 0:
        shaped = shaped * (1.0 + mult_coeff * score)
    if add_coeff != 0:
        shaped = shaped + add_coeff * (score - group_token_mean(score, mask, group_index))
    return shaped * mask


def tail_confidence(confidence: torch.Tensor, mask: torch.Tensor, window: int) -> torch.Tensor:
    """``(N,)``: the mean confidence over each completion's last ``window`` tokens (all of them if ``window`` is 0
    or the completion shorter); 0 for an empty completion."""
    lengths = mask.sum(1).long()
    positions = torch.arange(mask.size(1)).unsqueeze(0)
    span = lengths.clamp(max=window) if window > 0 else lengths
    tail = ((positions < lengths.unsqueeze(1)) & (positions >= (lengths - span).unsqueeze(1))).to(confidence.dtype)
    return ((confidence.clamp(0.0, 1.0) * tail).sum(1) / tail.sum(1).clamp_min(1.0)).clamp(0.0, 1.0)


def clip_epsilon(tail: torch.Tensor, *, eps_min: float, eps_max: float, kappa: float) -> torch.Tensor:
    """``(N,)``: ``eps_min + (eps_max - eps_min) * sigmoid(kappa * (1 - C_tail))``: wider where less confident."""
    return eps_min + (eps_max - eps_min) * torch.sigmoid(kappa * (1.0 - tail))
