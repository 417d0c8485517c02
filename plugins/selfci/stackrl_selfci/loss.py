"""SELFCI's loss per token, on packed ``(P, V)`` log-prob rows: two reverse KLs, written through their product of
experts."""

from __future__ import annotations

import torch

from stackrl.blocks.teacher import geometric_interpolation, reverse_kl


def product_of_experts(utility: torch.Tensor, privacy: torch.Tensor, utility_share: float) -> torch.Tensor:
    """Log-probs of ``p_privacy^(1 - s) p_utility^s``, renormalised (``s = utility_share``): the weighted geometric
    mean of the two teachers, the minimiser over the student of ``(1 - s) KL(. || p_privacy) + s KL(. || p_utility)``."""
    return geometric_interpolation(privacy, utility, utility_share)


def complementary_kl(
    student: torch.Tensor, utility: torch.Tensor, privacy: torch.Tensor, *, utility_weight: float = 1.0,
    privacy_weight: float = 1.0,
) -> torch.Tensor:
    """Per position ``(w_u KL(p || T_u) + w_p KL(p || T_p)) / max(w_u + w_p, 1)``, ``p`` the student, packed ``(P,)``.

    Computed as ``c (KL(p || q) - log Z)`` with ``q`` the product of experts at share ``s = w_u / W``,
    ``W = w_u + w_p``, ``c = W / max(W, 1)`` and ``Z = sum_v T_p(v)^(1 - s) T_u(v)^s``: the identity
    ``(1 - s) KL(p || T_p) + s KL(p || T_u) = KL(p || q) - log Z``. ``log Z`` (at most 0) does not depend on the
    student, so the gradient is that toward ``q`` and the value the authors' weighted sum of the two KLs.
    """
    total = utility_weight + privacy_weight
    share = utility_weight / total
    target = product_of_experts(utility, privacy, share)
    log_normaliser = torch.logsumexp((1.0 - share) * privacy + share * utility, dim=-1)
    return total / max(total, 1.0) * (reverse_kl(student, target) - log_normaliser)
