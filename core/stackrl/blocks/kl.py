"""A KL penalty to the reference model on chosen tokens only, as a loss term: for methods that anchor part of a
completion (one attempt of several) and leave the rest free, where TRL's ``beta`` weighs every token alike."""

from __future__ import annotations

import torch


def reference_kl(ctx, mask: torch.Tensor, model: str = "reference") -> torch.Tensor:
    """The mean, over the tokens ``mask`` marks (``(B, T)``, 1 to penalise) and the loss trains, of TRL's per-token
    estimate of KL(policy ‖ reference): ``exp(r − p) − (r − p) − 1``, ``p`` the policy's log-prob of the sampled
    token (``ctx.policy_logps``, with gradient) and ``r`` the reference model's, both at the sampling temperature
    as in TRL's own KL term. ``ctx`` is a ``loss_term``'s context; 0 (with gradient) when no token is marked.

    The reference model is ``model`` as ``ctx.score`` reads it: ``"reference"``, the host's (the LoRA-disabled
    base, or TRL's reference model when ``trainer.beta > 0``), or a snapshot's name (the policy as it started,
    where TRL's all-token KL is not wanted).
    """
    policy = ctx.policy_logps
    marked = (mask.to(policy.device) * ctx.loss_mask).float()
    if not marked.any():
        return policy.sum() * 0.0
    reference = ctx.score(
        ctx.rollout.prompt_ids, ctx.rollout.completion_ids, model=model, temperature=ctx.sampling_temperature
    )
    width = min(policy.size(1), reference.logprobs.size(1))
    ref = torch.zeros_like(policy)
    ref[:, :width] = reference.logprobs[:, :width].to(policy.device, policy.dtype)
    gap = ref - policy
    per_token = torch.exp(gap) - gap - 1
    return (per_token * marked).sum() / marked.sum()
