"""The role anchor (the paper's Eqs. 1-3): the role utility u(h, v) = log p(v | h, s_r) - log p(v | h, s_0), centred
over the candidate tokens, held to the frozen reference's by a squared difference."""

from __future__ import annotations

import torch


def centred_utility(role: torch.Tensor, neutral: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """The role utility at the candidate tokens, minus its mean over them.

    ``role`` and ``neutral`` are log-probs ``(..., V)``; ``candidates`` token ids ``(..., K)``. Returns ``(..., K)``.
    Centring drops any shift of the utility common to all candidates (the normalisers of the two prompts).
    """
    utility = role.gather(-1, candidates) - neutral.gather(-1, candidates)
    return utility - utility.mean(-1, keepdim=True)


def anchor_distance(role, neutral, ref_role, ref_neutral, mask, top_k: int | None) -> torch.Tensor:
    """Per-token role-anchor loss ``(N, T)``: the mean over the candidates of the squared difference between the
    policy's centred utility and the reference's, zero where ``mask`` is 0.

    The candidates at each position are the reference's ``top_k`` most likely tokens under the role prompt (every
    token when ``top_k`` is None). Log-prob inputs are ``(N, T, V)``; ``mask`` ``(N, T)``.
    """
    vocab = role.size(-1)
    if top_k is None or top_k >= vocab:
        candidates = torch.arange(vocab, device=role.device).expand(*role.shape[:-1], vocab)
    else:
        candidates = ref_role.topk(top_k, dim=-1).indices
    gap = centred_utility(role, neutral, candidates) - centred_utility(ref_role, ref_neutral, candidates).detach()
    return gap.pow(2).mean(-1) * mask
