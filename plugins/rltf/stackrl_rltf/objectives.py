"""The two loss terms of RLTF, on scored tokens: self-distillation (SD) and feedback modelling (FM).

Both are sums over tokens, as the authors' losses are; the plugin divides them by the micro-batch's completion
tokens, so that each token weighs its coefficient times one token of TRL's policy loss.
"""

from __future__ import annotations

import torch


def self_distillation_sum(logps: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor,
                          min_logprob: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``-sum_i A_i sum_t m_it log pi(y2_it | x_i)`` and the kept mask ``m``.

    ``logps`` (``(B, T)``, with gradient) are the second attempts' log-probabilities after the bare question,
    ``mask`` their real tokens, ``advantages`` (``(B,)``) each row's ``r2 - mean(r1)``. A token is kept where its
    log-probability is at least ``min_logprob`` (no gradient flows through that choice): the policy gradient of
    the authors' importance-sampling loss on the second attempt, put after the first turn's prompt, with the
    old log-probabilities those of the policy itself (ratio 1).
    """
    kept = mask.bool() & (logps.detach() >= min_logprob)
    return -(advantages[:, None] * logps * kept).sum(), kept


def feedback_nll_sum(logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``-sum log pi(c | x, y1)`` over the feedback's real tokens: the authors' cross-entropy on the critique."""
    return -(logps * mask).sum()
