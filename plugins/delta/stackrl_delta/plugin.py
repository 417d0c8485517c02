"""DelTA: discriminative token credit assignment for RLVR.

Paper: "DelTA: Discriminative Token Credit Assignment for Reinforcement Learning from Verifiable Rewards", Kaiyi
Zhang, Wei Wu, Yankai Lin, arXiv 2605.21467. Code: github.com/RUCBM/DelTA (not readable here; see the README).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import stackrl
from stackrl_delta.coefficients import group_coefficients, output_gradients


@dataclass
class DeltaConfig:
    # The soft assignment's temperature: a token's side score in [-1, 1] is divided by it before the sigmoid.
    # Lower sharpens the contrast between side-specific and shared tokens. Ours (the paper's value not read).
    temperature: float = 0.5
    # The distribution p in each token's feature (e_y - p) h: None uses the whole vocabulary (exact; N x T x V
    # floats), k the k most likely ids of each position and the sampled one (the rest of p dropped).
    topk: int | None = 64

    def __post_init__(self):
        if not self.temperature > 0:
            raise stackrl.ConfigError(f"delta.temperature: must be positive, not {self.temperature}")
        if self.topk is not None and (isinstance(self.topk, bool) or not isinstance(self.topk, int) or self.topk < 1):
            raise stackrl.ConfigError(f"delta.topk: must be a positive integer or null, not {self.topk!r}")


class Delta(stackrl.Plugin):
    """Per-token advantages: each token's advantage times its DelTA coefficient, which amplifies tokens whose
    last-layer gradient belongs to their own side of the group (positive or negative advantage) and downweights
    directions both sides share. One forward of the policy without gradient, with hidden states, per batch."""

    Config = DeltaConfig
    activity = "groups with both positive and negative advantages had their tokens reweighted"

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        """The advantages per token, times each token's coefficient in the groups with both sides."""
        rollout = ctx.rollout
        mask = rollout.completion_mask().float().to(advantages.device)
        if rollout.loss_mask is not None:
            for i, row in enumerate(rollout.loss_mask):
                mask[i, : len(row)] *= torch.tensor(row, dtype=mask.dtype, device=mask.device)
        for i in rollout.excluded:  # rows kept out of the loss train nothing: no centroid of theirs
            mask[i] = 0
        width = mask.size(1)
        tokens = advantages.float() if advantages.dim() == 2 else advantages.float()[:, None].expand(-1, width)
        tokens = tokens[:, :width] * mask
        size, groups = rollout.group_size, rollout.num_groups
        mixed = [g for g in range(groups)
                 if (tokens[g * size:(g + 1) * size] > 0).any() and (tokens[g * size:(g + 1) * size] < 0).any()]
        ctx.acted(len(mixed), of=groups, hint="no group had both a positive and a negative advantage")
        if not mixed:
            return None
        rows = [i for g in mixed for i in range(g * size, (g + 1) * size)]
        scores = ctx.score([rollout.prompt_ids[i] for i in rows], [rollout.completion_ids[i] for i in rows],
                           hidden_states=True, topk=self.config.topk, full_vocab=self.config.topk is None,
                           temperature=ctx.sampling_temperature)
        weights = torch.ones_like(tokens)
        scored = scores.mask.size(1)  # the longest completion of the groups scored
        for k, g in enumerate(mixed):
            local, here = slice(k * size, (k + 1) * size), slice(g * size, (g + 1) * size)
            chosen = mask[here, :scored].bool() & scores.mask[local].bool().to(mask.device)
            delta, hidden = features(scores, local, chosen, [rollout.completion_ids[i] for i in rows[local]])
            values = tokens[here, :scored][chosen]
            coefficient = group_coefficients(delta, hidden, values.to(delta.device), self.config.temperature)
            block = weights[here, :scored].clone()
            block[chosen] = coefficient.to(block)
            weights[here, :scored] = block
        spread = weights[mask.bool() & (tokens != 0)]
        ctx.log("coefficient_min", float(spread.min()))
        ctx.log("coefficient_max", float(spread.max()))
        return tokens * weights


def features(scores, rows: slice, chosen: torch.Tensor, completion_ids: list) -> tuple[torch.Tensor, torch.Tensor]:
    """``(delta (M, U), hidden (M, H))`` for the ``chosen`` tokens of ``rows``: ``e_y - p`` over the whole
    vocabulary (``full_vocab`` scores) or over the union of the group's top-k ids and sampled ids."""
    width = chosen.size(1)
    device = scores.hidden_states.device
    ids = torch.zeros(chosen.shape, dtype=torch.long)
    for r, row in enumerate(completion_ids):
        n = min(len(row), width)
        ids[r, :n] = torch.tensor(row[:n], dtype=torch.long)
    chosen = chosen.to(device)
    ids = ids.to(device)[chosen]
    hidden = scores.hidden_states[rows][chosen].float()
    if scores.vocab_logprobs is not None:
        return output_gradients(ids, scores.vocab_logprobs[rows][chosen].float().exp()), hidden
    top_ids = scores.topk_ids[rows][chosen]
    support = torch.unique(torch.cat([top_ids.flatten(), ids]))
    column = torch.searchsorted(support, top_ids)
    probs = torch.zeros(len(ids), len(support), device=device)
    probs.scatter_(1, column, scores.topk_logprobs[rows][chosen].float().exp())
    return output_gradients(torch.searchsorted(support, ids), probs), hidden
