"""Skill-SD's importance-weighted reverse KL on the sampled tokens.

The reverse KL from the student to the skill-conditioned teacher, KL(pi_theta || pi_T), has the gradient
E_{y ~ pi_theta}[(log pi_theta(y_t) - log pi_T(y_t)) grad log pi_theta(y_t)] over the tokens the student sampled.
Differentiating the sampled-token difference itself, log pi_theta(y_t) - log pi_T(y_t), gives grad log pi_theta
alone, the same push down on every sampled token whatever the teacher says: its expectation is zero and the
teacher drops out. The gradient-correct form weights each token by the importance ratio
w_t = pi_theta(y_t) / pi_behaviour(y_t), whose gradient is w_t grad log pi_theta, times the detached gap:

    loss = mean over distilled tokens of  min(c, w_t) * stopgrad(log pi_theta(y_t) - log pi_T(y_t))

On the student's own fresh rollout pi_behaviour is the policy that sampled it (the loss's own log-probs, detached:
w_t = 1 with the gradient above); a row another policy wrote (``Samples.behaviour_logprobs``) is corrected toward
the policy being trained, truncated at c as the host truncates its weights.
"""

from __future__ import annotations

import torch


def importance_weights(student_logps: torch.Tensor, behaviour_logps: torch.Tensor, truncation: float) -> torch.Tensor:
    """``min(c, pi_theta / pi_behaviour)`` per token, carrying the gradient of ``pi_theta`` (of ``w`` itself while
    ``w < c``; scaled by ``c / w`` past it, so the push keeps its direction and is at most ``c`` times a plain one)."""
    ratio = torch.exp(student_logps - behaviour_logps.detach())
    return ratio * torch.clamp(truncation / ratio.detach(), max=1.0)


def importance_weighted_reverse_kl(
    student_logps: torch.Tensor,
    teacher_logps: torch.Tensor,
    mask: torch.Tensor,
    *,
    behaviour_logps: torch.Tensor | None = None,
    truncation: float = 3.0,
) -> torch.Tensor:
    """The loss above over ``(B, T)`` sampled-token log-probs, the mean over the tokens ``mask`` marks.

    ``student_logps`` carry the gradient; ``teacher_logps`` are the skill-conditioned teacher's (no gradient);
    ``behaviour_logps`` those of the policy that sampled each token (default: the student's, detached).
    """
    behaviour = student_logps.detach() if behaviour_logps is None else behaviour_logps
    weights = importance_weights(student_logps, behaviour, truncation)
    gap = (student_logps - teacher_logps).detach()
    mask = mask.to(student_logps.dtype)
    return (weights * gap * mask).sum() / mask.sum().clamp(min=1.0)
