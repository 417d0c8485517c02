"""The π-Distill objective on packed completion tokens, as a loss to minimise.

The rollout is sampled from the teacher ``pi_T = pi(. | x, I)`` (the policy shown the privileged information ``I``);
the student ``pi_S = pi(. | x)`` is the same weights without it. The paper's joint objective is

    J = alpha * J_T + (1 - alpha) * J_S
    J_T = E_{y ~ pi_T}[R] - beta * KL(pi_T || sg pi_S)
    J_S = E_{y ~ pi_T}[pi_S / sg pi_T * R] - beta * KL(sg pi_T || pi_S)

GRPO's own loss, on the teacher's prompts with its advantages scaled by ``alpha``, is ``alpha * E[R]``; this module
is the rest: the student's importance-weighted policy gradient (per token, clipped as PPO clips, as the authors'
code does) and both KL terms, each at every position over the whole vocabulary (the authors' Rao-Blackwellised
estimator). Both KLs are ``KL(pi_T || pi_S)``; they differ only in which side the gradient reaches.
"""

from __future__ import annotations

import torch

from stackrl.blocks.teacher import forward_kl


def student_and_teacher_terms(
    student_logps: torch.Tensor,
    teacher_logps: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    student_vocab: torch.Tensor | None = None,
    teacher_vocab: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The per-position terms, ``(P,)`` each, from the sampled tokens' log-probs under the student and the teacher
    ``(P,)``, each token's advantage ``(P,)`` and, for the KLs, both packed distributions ``(P, V)``.

    - ``student_pg``: ``-min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)``, ``r = exp(log pi_S - sg log pi_T)``;
    - ``student_kl``: ``KL(sg pi_T || pi_S)``, whose gradient is the student's NLL of the teacher's distribution;
    - ``teacher_kl``: ``KL(pi_T || sg pi_S)``, pulling the teacher toward what the student can follow.
    """
    ratio = torch.exp(student_logps - teacher_logps.detach())
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    terms = {"student_pg": -torch.minimum(ratio * advantages, clipped * advantages)}
    if student_vocab is not None and teacher_vocab is not None:
        terms["student_kl"] = forward_kl(student_vocab, teacher_vocab.detach())
        terms["teacher_kl"] = forward_kl(student_vocab.detach(), teacher_vocab)
    return terms


def joint_loss(terms: dict[str, torch.Tensor], alpha: float, beta: float) -> torch.Tensor:
    """``(1 - alpha) * (student_pg + beta * student_kl) + alpha * beta * teacher_kl``, averaged over positions."""
    student = terms["student_pg"]
    if beta > 0:
        student = student + beta * terms["student_kl"]
    loss = (1.0 - alpha) * student
    if beta > 0 and alpha > 0:
        loss = loss + alpha * beta * terms["teacher_kl"]
    return loss.mean()
