"""Truncated importance weights of rows another policy wrote: a replayed stale rollout, a snapshot's sample.

A ``generate_rollout`` plugin may hand, with each such row, the per-token log-probs of the policy that sampled it
(``Samples.behaviour_logprobs``). The trainer scores those rows under the policy that generated this rollout
(``pi_now``) and multiplies their advantages by the detached weight ``min(c, pi_now / pi_behaviour)``:

- ``level: token`` (the default): one weight per completion token, ``min(c, exp(logp_now - logp_behaviour))``,
  as TRL's ``token_truncate`` correction of vLLM's samples and IMPALA's truncated per-step weights; a token the
  plugin injected (``loss_mask`` 0) keeps weight 1;
- ``level: sequence``: one weight per row, ``min(c, exp(sum of the token differences))``: unbiased for a whole
  sequence but of high variance on long completions.

Rows without behaviour log-probs keep weight exactly 1. When a rollout trains several optimizer steps
(``num_iterations`` > 1), TRL's clipped ratio still corrects from ``pi_now`` to the weights being trained: the
product of the two is the full importance ratio. TRL's own correction (``vllm_importance_sampling_*``) runs only
with vLLM generation and on every row, so the host computes this one itself, in the advantage stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from stackrl.errors import PluginError

LEVELS = ("token", "sequence")
METRIC_PREFIX = "importance"  # importance/ratio_mean, importance/clipped_share, importance/rows
MAX_LOG_RATIO = 20.0  # the logged mean caps each log-ratio here, so one far-off row cannot make it infinite
LOGPROB_SLACK = 1e-4  # rounding may leave a log-prob of a near-certain token a hair above 0


@dataclass
class Weights:
    """The weights of a rollout's rows: ``(N,)`` at sequence level, ``(N, T)`` at token level (1 on rows without
    behaviour log-probs and on padding); ``ratio_mean`` (untruncated, over the weighted tokens or rows),
    ``clipped_share`` (the share of those whose ratio passed ``c``) and ``rows`` (how many rows were weighted)."""

    weights: torch.Tensor
    ratio_mean: float
    clipped_share: float
    rows: int

    def figures(self) -> dict[str, float]:
        return {
            f"{METRIC_PREFIX}/ratio_mean": self.ratio_mean,
            f"{METRIC_PREFIX}/clipped_share": self.clipped_share,
            f"{METRIC_PREFIX}/rows": float(self.rows),
        }


def checked_behaviour_logprobs(where: str, logprobs: list, completion_ids: list[list[int]]) -> list | None:
    """``Samples.behaviour_logprobs`` checked against the completions: one entry per row, ``None`` or one finite
    log-prob (<= 0) per completion token; ``None`` when no row has any."""
    if len(logprobs) != len(completion_ids):
        raise PluginError(
            f"{where} returned {len(logprobs)} behaviour_logprobs rows; expected {len(completion_ids)} (one per row, "
            "None for a row the policy sampled now)"
        )
    checked = []
    for row, (values, ids) in enumerate(zip(logprobs, completion_ids)):
        if values is None:
            checked.append(None)
            continue
        values = [float(v) for v in values]
        if len(values) != len(ids):
            raise PluginError(
                f"{where} returned {len(values)} behaviour log-probs for row {row}, whose completion has {len(ids)} "
                "tokens"
            )
        bad = next((v for v in values if not math.isfinite(v) or v > LOGPROB_SLACK), None)
        if bad is not None:
            raise PluginError(
                f"{where} returned behaviour log-prob {bad} for row {row}; expected the finite log-probs (<= 0) of "
                "the completion's tokens under the policy that sampled it"
            )
        checked.append(values)
    return checked if any(values is not None for values in checked) else None


def importance_weights(
    now: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor, truncation: float, level: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(weights, ratios, counted)`` of ``R`` rows from ``(R, T)`` log-probs under the current and the behaviour
    policy and the mask of the tokens that count: per token ``(R, T)`` (1 where the mask is 0) or per row
    ``(R,)``; ``counted`` marks the ratios the figures average (the masked tokens, or every row)."""
    log_ratio = (now - behaviour) * mask
    if level == "sequence":
        log_ratio = log_ratio.sum(dim=1)
        counted = torch.ones_like(log_ratio, dtype=torch.bool)
    else:
        counted = mask.bool()
    ratios = torch.exp(log_ratio.clamp(max=MAX_LOG_RATIO))
    return ratios.clamp(max=truncation), ratios, counted


def rollout_weights(
    prompt_ids: list[list[int]],
    completion_ids: list[list[int]],
    behaviour: list,
    loss_mask: list[list[int]] | None,
    score,
    truncation: float,
    level: str,
) -> Weights:
    """The weights of a whole rollout. ``behaviour`` holds each row's behaviour log-probs or ``None``; ``score(
    prompt_ids, completion_ids)`` returns the current policy's ``(R, T)`` log-probs and mask of the rows given
    (the trainer's ``PolicyAccess.score`` at the run's sampling temperature)."""
    rows = [i for i, values in enumerate(behaviour) if values is not None]
    width = max((len(ids) for ids in completion_ids), default=0)
    scores = score([prompt_ids[i] for i in rows], [completion_ids[i] for i in rows])
    now = scores.logprobs.detach().float().cpu()
    mask = scores.mask.float().cpu()
    if loss_mask is not None:
        mask = mask * _padded([loss_mask[i] for i in rows], now.size(1))
    weights, ratios, counted = importance_weights(now, _padded([behaviour[i] for i in rows], now.size(1)), mask,
                                                  truncation, level)
    full = torch.ones(len(completion_ids)) if level == "sequence" else torch.ones(len(completion_ids), width)
    full[rows] = weights if level == "sequence" else torch.nn.functional.pad(weights, (0, width - weights.size(1)),
                                                                             value=1.0)
    kept = ratios[counted]
    return Weights(
        weights=full,
        ratio_mean=float(kept.mean()) if kept.numel() else 1.0,
        clipped_share=float((kept > truncation).float().mean()) if kept.numel() else 0.0,
        rows=len(rows),
    )


def weighted(advantages: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Advantages ``(N,)`` or ``(N, T)`` times weights ``(N,)`` or ``(N, T)``: per token where either is."""
    if advantages.dim() == weights.dim():
        return advantages * weights
    if advantages.dim() == 1:
        return advantages.unsqueeze(1) * weights
    return advantages * weights.unsqueeze(1)


def _padded(rows: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width)
    for i, values in enumerate(rows):
        out[i, : len(values)] = torch.tensor(values, dtype=torch.float32)
    return out
