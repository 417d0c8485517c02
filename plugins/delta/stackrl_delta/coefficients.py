"""DelTA's token coefficients from last-layer token-gradient features.

A token's gradient of log p(y_t) with respect to the LM head is the outer product g_t = (e_y - p_t) h_tᵀ (the
sampled token's one-hot less the distribution, times the hidden state the head projects). Each side of a group
(positive or negative advantage) has a centroid, the advantage-weighted mean of its tokens' g_t; a token's
projections on the two centroids say whether its direction belongs to its own side, to both (shared: formatting,
boilerplate) or to the other side. The coefficient is a soft assignment of the token to its own side, normalised
within the side so the side's total credit is unchanged (the self-normalised surrogate).

The centroids are kept explicitly, ``(U, H)`` for a vocabulary subspace of ``U`` ids, so the cost is linear in the
number of tokens: <g_t, C> = (e_y - p_t)ᵀ C h_t.
"""

from __future__ import annotations

import torch


def output_gradients(columns: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """``(M, U)``: each token's ``e_y - p`` over a vocabulary subspace of ``U`` ids (the whole vocabulary, or fewer):
    ``probs`` ``(M, U)`` the distributions over it, ``columns`` ``(M,)`` where each sampled token lies in it."""
    delta = -probs.clone()
    delta[torch.arange(len(columns), device=delta.device), columns] += 1.0
    return delta


def centroid(delta: torch.Tensor, hidden: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``(U, H)``: the ``weights``-weighted mean of the tokens' ``delta_t h_tᵀ`` (zeros when the weights are)."""
    total = weights.sum()
    if total <= 0:
        return delta.new_zeros(delta.size(1), hidden.size(1))
    return torch.einsum("m,mu,mh->uh", weights / total, delta, hidden)


def projections(delta: torch.Tensor, hidden: torch.Tensor, center: torch.Tensor) -> torch.Tensor:
    """``(M,)``: each token's inner product <delta_t h_tᵀ, center>."""
    return ((delta @ center) * hidden).sum(-1)


def soft_assignment(own: torch.Tensor, other: torch.Tensor, temperature: float, eps: float = 1e-8) -> torch.Tensor:
    """How much a token belongs to its own side: sigmoid of ``(own - other) / (|own| + |other|)`` over
    ``temperature``. 0.5 for a shared direction (equal projections, or none), towards 1 for one of its own side
    only, towards 0 for one that looks like the other side's."""
    score = (own - other) / (own.abs() + other.abs() + eps)
    return torch.sigmoid(score / temperature)


def group_coefficients(delta: torch.Tensor, hidden: torch.Tensor, advantages: torch.Tensor,
                       temperature: float) -> torch.Tensor:
    """``(M,)`` coefficients for the ``M`` tokens of one group, from their features and per-token advantages.

    Centroids: c+ the mean of the positive tokens' features weighted by their advantage, c- of the negative ones
    weighted by its magnitude. A token of side s gets the soft assignment of its projections (c_s, c_-s), then the
    side's coefficients are scaled to sum to its token count. Tokens of zero advantage get 1 (they train nothing)."""
    positive, negative = advantages > 0, advantages < 0
    up = projections(delta, hidden, centroid(delta, hidden, advantages.clamp(min=0)))
    down = projections(delta, hidden, centroid(delta, hidden, (-advantages).clamp(min=0)))
    own = torch.where(positive, up, down)
    other = torch.where(positive, down, up)
    soft = soft_assignment(own, other, temperature)
    out = torch.ones_like(advantages)
    for side in (positive, negative):
        if side.any():
            out[side] = soft[side] * side.sum() / soft[side].sum()
    return out
