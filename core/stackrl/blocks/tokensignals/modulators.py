"""Token modulators: turn per-token signals into per-token advantages.

Every function takes ``(N, T)`` tensors with a ``(N, T)`` 0/1 ``mask`` of real tokens and returns ``(N, T)``
values that are zero on padding. Sequence advantages are ``(N,)``; a modulator never changes their sign.
"""

from __future__ import annotations

import torch

from stackrl.errors import StackrlError


def per_token(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Advantages as ``(N, T)``: a sequence advantage repeated on each of its tokens, per-token ones kept."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1).expand_as(mask)
    return advantages * mask


def acted_on_tokens(ctx, advantages: torch.Tensor, reshaped: torch.Tensor, mask: torch.Tensor, hint: str | None = None):
    """Report the completion tokens whose advantage ``reshaped`` changed from ``advantages`` as the plugin's activity
    (``ctx.acted``, of every completion token), and return ``reshaped``."""
    before = per_token(advantages, mask)
    changed = ((reshaped - before).abs() > 1e-6 * (1 + before.abs())) & mask.bool()
    hint = hint or "no token's advantage changed: no row had the teacher's context, or every advantage was 0"
    ctx.acted(int(changed.sum()), of=int(mask.sum()), hint=hint)
    return reshaped


def mean_one(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Positive ``weights`` scaled per sequence so that their mean over the sequence's tokens is 1."""
    mask = mask.to(weights.dtype)
    total = (weights * mask).sum(1, keepdim=True)
    count = mask.sum(1, keepdim=True)
    return torch.where(total > 0, weights * count / total.clamp_min(torch.finfo(weights.dtype).tiny), mask)


def magnitude_weights(signal: torch.Tensor, direction: torch.Tensor, mask: torch.Tensor, clip: float) -> torch.Tensor:
    """``exp(sign(direction) * clamp(signal, -clip, clip))``: positive weights, so they never flip an advantage.

    ``direction`` is ``(N,)`` or ``(N, T)`` (usually the advantages): where it is positive, tokens with a large
    signal weigh more; where negative, tokens with a small (very negative) signal weigh more; where zero, 1.
    """
    if clip <= 0:
        raise StackrlError(f"magnitude_weights: clip must be positive, not {clip}")
    sign = per_token(direction.sign(), mask)
    return torch.exp(sign * signal.clamp(-clip, clip)) * mask


def bounded_weights(signal: torch.Tensor, direction: torch.Tensor, mask: torch.Tensor, bound: float) -> torch.Tensor:
    """``clamp(exp(sign(direction) * signal), 1 - bound, 1 + bound)``: the exponential kept near 1 (no clip on the
    signal; the bound is on the weight). ``direction`` as in :func:`magnitude_weights`."""
    if not 0 < bound < 1:
        raise StackrlError(f"bounded_weights: bound must be in (0, 1), not {bound}")
    sign = per_token(direction.sign(), mask)
    return torch.exp(sign * signal).clamp(1 - bound, 1 + bound) * mask


def mixed(weights: torch.Tensor, share: float, mask: torch.Tensor) -> torch.Tensor:
    """``(1 - share) + share * weights``: weights applied at ``share`` of their strength (0: all 1)."""
    return ((1 - share) + share * weights) * mask


def linear_decay(value: float, steps: int, step: int) -> float:
    """``value`` at step 0, falling linearly to 0 at step ``steps`` and after; ``steps`` 0 keeps it constant."""
    if steps <= 0:
        return value
    return value * max(0.0, 1.0 - step / steps)


def reweight(advantages: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor, normalize: bool) -> torch.Tensor:
    """``advantages`` times non-negative ``weights``: rescaled per sequence to keep its credit
    (:func:`reallocate`) with ``normalize``, as they are without."""
    if normalize:
        return reallocate(advantages, weights, mask)
    return per_token(advantages, mask) * weights


def reallocate(advantages: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Budget-preserving credit: ``A * w_t * T / sum_u w_u``.

    ``advantages`` is ``(N,)`` or ``(N, T)``; ``weights`` are non-negative. Each sequence keeps its total credit
    (the sum of its token advantages) and its sign: only the split of the credit across its tokens changes.
    A sequence whose weights are all zero keeps its advantages as they were.
    """
    if (weights < 0).any():
        raise StackrlError("reallocate: weights must be non-negative, or a token's credit would change sign")
    token_advantages = per_token(advantages, mask)
    if advantages.dim() == 1:
        return token_advantages * mean_one(weights, mask)
    # Per-token advantages: each token's share of the sequence's credit moves with its weight, the total stays.
    weighted = token_advantages * weights
    total, new_total = token_advantages.sum(1, keepdim=True), weighted.sum(1, keepdim=True)
    ratio = torch.where(new_total != 0, total / torch.where(new_total != 0, new_total, 1.0), 0.0)
    scaled = weighted * ratio
    keep = (new_total == 0) | (ratio < 0)  # nothing to reallocate, or the reweighting would flip the sign
    return torch.where(keep, token_advantages, scaled)


def route(correct: torch.Tensor, if_correct: torch.Tensor, if_incorrect: torch.Tensor) -> torch.Tensor:
    """Rows of ``if_correct`` where ``correct`` (``(N,)`` bool) holds, rows of ``if_incorrect`` elsewhere."""
    return torch.where(correct.bool().unsqueeze(1), if_correct, if_incorrect)


def inverse_sensitivity(sensitivity: torch.Tensor, strength: float) -> torch.Tensor:
    """``1 / (1 + strength * sensitivity)``: down-weights tokens by how far a context moves them (non-negative)."""
    if strength < 0:
        raise StackrlError(f"inverse_sensitivity: strength must be non-negative, not {strength}")
    return 1.0 / (1.0 + strength * sensitivity.abs())


def entropy_gate(entropy: torch.Tensor, mask: torch.Tensor, threshold: float, *, above: bool = True) -> torch.Tensor:
    """1.0 on the tokens whose entropy is above ``threshold`` (or at most it, with ``above=False``), else 0."""
    gate = entropy > threshold if above else entropy <= threshold
    return gate.to(mask.dtype if mask.is_floating_point() else torch.float32) * mask


def sigmoid_gate(signal: torch.Tensor, mask: torch.Tensor, sharpness: float) -> torch.Tensor:
    """``sigmoid(sharpness * signal)`` on the real tokens, 0 on padding: a soft gate, above 1/2 where the signal is
    positive and toward 0 where it is very negative (``sharpness`` 0: 1/2 everywhere)."""
    if sharpness < 0:
        raise StackrlError(f"sigmoid_gate: sharpness must be non-negative, not {sharpness}")
    return torch.sigmoid(sharpness * signal) * mask
