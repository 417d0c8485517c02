"""beta-OPSD's loss per token, on packed ``(P, V)`` rows: the divergence to the target plus its return-to-go credit."""

from __future__ import annotations

import torch

from stackrl.blocks.teacher import forward_kl, returns_to_go, reverse_kl

DIVERGENCE = {"reverse_kl": reverse_kl, "forward_kl": forward_kl}


def trajectory_divergence(
    student: torch.Tensor, target: torch.Tensor, tokens: torch.Tensor, lengths: list[int], *,
    divergence: str = "reverse_kl", return_to_go: bool = True,
) -> torch.Tensor:
    """Per token ``t``: ``D_t = D(student_t, target_t)``, and with ``return_to_go`` a term whose gradient is
    ``G_t * grad log student_t(y_t)``, where ``G_t`` sums the (detached) ``D`` of the later tokens of the same
    completion. Packed ``(P,)``; ``tokens`` are the sampled tokens ``y_t``, ``lengths`` the completions' lengths.

    A token-level loss sees only that each ``D_t`` depends on the student's distribution at ``t``; the sampled
    token ``y_t`` also chooses every later state, hence every later ``D``. With the return-to-go the summed
    gradient is that of ``E_{y ~ student}[sum_t D_t]``, the whole completion's divergence (exactly so when the
    completions were sampled from ``student``). The added term is zero in value: the logged loss stays the mean
    divergence.
    """
    per_token = DIVERGENCE[divergence](student, target)
    if not return_to_go:
        return per_token
    later = returns_to_go(per_token.detach(), lengths, include_current=False)
    sampled = student.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return per_token + later * (sampled - sampled.detach())
