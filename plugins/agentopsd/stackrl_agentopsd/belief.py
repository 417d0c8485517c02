"""The belief recursion over a row's turns: turn evidence from token gaps, the success belief in log-odds, its
revisions, and the bounded per-turn multipliers the revisions give the outcome advantage.

Every function works on one row: ``K`` turns, each a token span of the row's completion.
"""

from __future__ import annotations

import torch

EVIDENCE = ("sum", "mean")
REVISIONS = ("signed", "magnitude")
PRIOR_CLAMP = 1e-4  # the prior stays inside (0, 1), so its log-odds are finite for an all-right or all-wrong group
EPS = 1e-6  # the beliefs' clamp and the z-score's floor, as the authors'


def turn_evidence(gap: torch.Tensor, mask: torch.Tensor, spans: list[tuple[int, int]], how: str) -> torch.Tensor:
    """``(K,)``: each turn's evidence, the ``sum`` (or ``mean``) of the token gaps ``log pi_T - log pi_S`` in its
    span over the real tokens (``gap`` and ``mask`` are the row's ``(T,)``)."""
    evidence = []
    for start, end in spans:
        total = (gap[start:end] * mask[start:end]).sum()
        count = mask[start:end].sum()
        evidence.append(total if how == "sum" else total / count.clamp_min(1))
    return torch.stack(evidence) if evidence else gap.new_zeros(0)


def beliefs(evidence: torch.Tensor, prior: float, decay: float) -> torch.Tensor:
    """``(K + 1,)``: the success belief before the first turn (``prior``) and after each turn,
    ``V_k = sigmoid(logit(prior) + c_k)`` with ``c_k = decay * c_{k-1} + e_k`` (``decay`` 1: the plain sum of the
    evidence so far, a Bayesian update in log-odds; 0: each turn's own evidence alone)."""
    prior = min(max(prior, PRIOR_CLAMP), 1 - PRIOR_CLAMP)
    log_odds = torch.logit(torch.tensor(prior, dtype=evidence.dtype))
    accumulated, path = evidence.new_zeros(()), [torch.tensor(prior, dtype=evidence.dtype)]
    for e in evidence:
        accumulated = decay * accumulated + e
        path.append(torch.sigmoid(log_odds + accumulated).clamp(EPS, 1 - EPS))
    return torch.stack(path)


def revisions(path: torch.Tensor) -> torch.Tensor:
    """``(K,)``: how far each turn moved the belief, ``V_k - V_{k-1}``."""
    return path[1:] - path[:-1]


def standardized(values: torch.Tensor) -> torch.Tensor:
    """``(values - mean) / (std + EPS)`` over the row's turns (population std); one turn gets 0."""
    if values.numel() < 2:
        return torch.zeros_like(values)
    return (values - values.mean()) / (values.std(unbiased=False) + EPS)


def turn_scores(revision: torch.Tensor, how: str) -> torch.Tensor:
    """``(K,)``: each turn's standardized revision, ``z(V_k - V_{k-1})`` (``signed``) or ``z(|V_k - V_{k-1}|)``
    (``magnitude``)."""
    return standardized(revision if how == "signed" else revision.abs())


def token_weights(scores: torch.Tensor, spans: list[tuple[int, int]], direction: torch.Tensor, how: str,
                  band: float) -> torch.Tensor:
    """``(T,)`` multipliers in ``[1 - band, 1 + band]``, 1 outside every turn.

    ``signed`` (the paper's outcome-consistent form): ``1 + band * sign(A_t) * z_k`` on turn ``k``'s tokens, so on
    a rollout with a positive advantage the turn that raised the belief most weighs most, on a negative one the
    turn that lowered it most. ``magnitude``: ``1 + band * z_k``, whichever way the belief moved. ``direction`` is
    the row's advantage on each token, ``(T,)``.
    """
    weights = torch.ones_like(direction)
    for z, (start, end) in zip(scores, spans):
        steer = direction[start:end].sign() if how == "signed" else 1.0
        weights[start:end] = (1 + band * steer * z).clamp(1 - band, 1 + band)
    return weights
