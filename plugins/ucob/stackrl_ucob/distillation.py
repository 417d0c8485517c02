"""UCOB's distillation loss: the teacher view's top-k distribution on its own completion, taught to the other view.

For a distilled row, the teacher is the policy given the row's own (winning) view, the student the policy given the
other view's context, both on the row's completion. Per token: the forward KL from the teacher's top-k tokens
(both renormalised there) to the student, times a gate ``sigmoid(gate_beta * (log p_teacher - log p_student))`` of
the sampled token (no gradient), times the row's weight; the mean over the distilled tokens. The authors'
``compute_dsdar_topk_loss`` (TU2021/UCOB, ``verl/trainer/ppo/sdar_utils.py``) with its defaults.
"""

from __future__ import annotations

import torch

from stackrl.blocks.teacher import forward_kl, restrict_to_teacher_topk


def gated_topk_kl(student_vocab: torch.Tensor, teacher_topk: torch.Tensor, teacher_ids: torch.Tensor | None,
                  student_token: torch.Tensor, teacher_token: torch.Tensor, weights: torch.Tensor, *,
                  gate_beta: float | None) -> torch.Tensor:
    """The loss over ``P`` packed positions: ``student_vocab`` ``(P, V)`` log-probs (with gradient),
    ``teacher_topk`` ``(P, k)`` and ``teacher_ids`` ``(P, k)`` (``None``: ``teacher_topk`` is the full ``(P, V)``
    distribution), the sampled token's log-prob under each ``(P,)``, and each position's row weight ``(P,)``.
    ``gate_beta`` ``None`` leaves the gate out."""
    if teacher_ids is None:
        student, teacher = student_vocab, teacher_topk
    else:
        student, teacher = restrict_to_teacher_topk(student_vocab, teacher_topk, teacher_ids)
    per_token = forward_kl(student, teacher.detach())
    if gate_beta is not None:
        per_token = per_token * torch.sigmoid(gate_beta * (teacher_token - student_token)).detach()
    return (per_token * weights).sum() / max(per_token.numel(), 1)
