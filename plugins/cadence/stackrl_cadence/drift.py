"""DRIFT with COVA and FTB: the per-token mixture of the forward-KL and reverse-KL surrogates on the student's own
tokens, its coverage-adaptive mixing weight and the boost at the teacher's forking tokens. Tensors are ``(N, T)``
over completion tokens (``mask`` 1 on real ones), or ``(..., V)`` distributions as log-probs."""

from __future__ import annotations

import math

import torch


def cosine_beta(step: int, steps: int, start: float, end: float) -> float:
    """beta's time-only schedule: ``start`` at step 0, ``end`` from step ``steps`` on, a half cosine between."""
    progress = min(1.0, max(0, step) / steps)
    return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * progress))


def cova_beta(beta_cosine: float, coverage: float | None, gate: float, alpha_max: float, beta_end: float) -> float:
    """COVA: ``max(beta_end, beta_cosine * (1 - alpha_max * max(0, coverage - gate) / (1 - gate)))``. At or below
    the gate (or before any coverage is measured) it is the cosine schedule's beta; above, smaller, by up to
    ``alpha_max`` of it at full coverage: the student that already covers the teacher's mass turns to the reverse
    KL sooner."""
    if coverage is None:
        return beta_cosine
    excess = max(0.0, coverage - gate) / (1.0 - gate)
    return max(beta_end, beta_cosine * (1.0 - alpha_max * excess))


def coverage(student: torch.Tensor, teacher: torch.Tensor, k: int, tau: float) -> torch.Tensor:
    """The share of the teacher's top-``k`` probability mass on tokens the student gives more than ``tau``, at each
    position (``(..., V)`` log-probs in, ``(...)`` out)."""
    top = teacher.topk(min(k, teacher.size(-1)), dim=-1)
    mass = top.values.exp()
    covered = student.gather(-1, top.indices).exp() > tau
    return (mass * covered).sum(-1) / mass.sum(-1)


def entropy(logprobs: torch.Tensor) -> torch.Tensor:
    """The entropy in nats of each position's distribution (``(..., V)`` log-probs in)."""
    return -(logprobs.exp() * logprobs).sum(-1)


def log_ratio(student_logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``k_t = log pi_student(x_t) - log pi_teacher(x_t)`` of each sampled token (0 on padding)."""
    return (student_logp - teacher_logp) * mask


def forward_surrogate(k: torch.Tensor, mask: torch.Tensor, clip: float) -> torch.Tensor:
    """The forward-KL surrogate's advantage: the self-normalised importance weights ``w_t = clip(exp(-k_t), 0,
    clip)`` of each completion, scaled to mean 1 over its tokens: ``T_i * w_t / sum_t' w_t'`` (the paper's
    ``G * w_t / (sum w + eps)``, G read as the completion's token count)."""
    weights = torch.exp(-k).clamp(0.0, clip) * mask
    count = mask.sum(1, keepdim=True)
    return count * weights / (weights.sum(1, keepdim=True) + 1e-8)


def drift_advantages(k: torch.Tensor, mask: torch.Tensor, beta: float, clip: float) -> torch.Tensor:
    """DRIFT: ``(1 - beta) * (-k_t) + beta * A_fwd_t`` at each token: the reverse-KL surrogate (the teacher's
    log-ratio: a token the teacher likes more than the student gains) mixed with the forward-KL one."""
    return ((1.0 - beta) * (-k) + beta * forward_surrogate(k, mask, clip)) * mask


def forking_boost(teacher_entropy: torch.Tensor, mask: torch.Tensor, boost: float, reference: float) -> torch.Tensor:
    """FTB's factor ``1 + boost * min(1, H_teacher / reference)``: up to ``1 + boost`` at the teacher's forks,
    against a fixed reference entropy so that it compares across completions."""
    return (1.0 + boost * (teacher_entropy / reference).clamp(max=1.0)) * mask
