"""Per-position statistics of a distribution over the vocabulary, computed a chunk of positions at a time.

A teacher's entropy at every position of a batch is a sum over the vocabulary, but the float32 softmax it needs
is as large as the logits themselves: ``N x T x V``. Here the softmax lives only for ``chunk_size`` positions at a
time, so the extra memory is ``chunk_size x V`` whatever the batch; gradients flow through when the input has them.
"""

from __future__ import annotations

import torch

from stackrl.errors import StackrlError


def entropy_and_topk_mass(logits: torch.Tensor, k: int, *, chunk_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """The entropy of ``softmax(logits)`` and the probability mass of its ``k`` most likely tokens at each position.

    ``logits`` is ``(..., V)`` (log-probs work too: the softmax of log-probs is the same distribution); both
    results have the leading shape ``(...)``, in float32. Positions are processed ``chunk_size`` at a time.
    """
    if not 1 <= k <= logits.size(-1):
        raise StackrlError(f"entropy_and_topk_mass: k must lie in [1, {logits.size(-1)}] (the vocabulary), not {k}")
    if chunk_size < 1:
        raise StackrlError(f"entropy_and_topk_mass: chunk_size must be at least 1, not {chunk_size}")
    flat = logits.reshape(-1, logits.size(-1))
    entropies, masses = [], []
    for chunk in flat.split(chunk_size):
        logps = torch.log_softmax(chunk.float(), dim=-1)
        entropies.append(-(logps.exp() * logps).sum(-1))
        masses.append(logps.topk(k, dim=-1).values.logsumexp(-1).exp())
    shape = logits.shape[:-1]
    if not entropies:  # no positions at all
        empty = logits.new_zeros(shape, dtype=torch.float32)
        return empty, empty.clone()
    return torch.cat(entropies).reshape(shape), torch.cat(masses).reshape(shape)
