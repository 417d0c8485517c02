"""The creator's signal: each prompt's regret, estimated from the rewards of its group, and the choice of the
prompts to evolve.

The authors rate a prompt by the spread of the rewards of the solver's responses to it (``reward_gap``, the best
minus the worst, in their later runs; ``reward_maxmean``, the best minus the mean, and the variance beside it), and
sample the share ``select_frac`` of their prompts to evolve without replacement, each with probability proportional
to its regret min-max normalised over the prompts (``importance_weighted``).
"""

from __future__ import annotations

import math

import torch

REGRETS = ("gap", "maxmean", "var")  # max - min, max - mean, variance (population) of a group's rewards
SELECTIONS = ("weighted", "top")


def group_regret(rewards: torch.Tensor, group_size: int, kind: str = "gap") -> list[float]:
    """One regret per group of ``rewards`` (row ``i`` in group ``i // group_size``): ``gap`` the best reward minus
    the worst, ``maxmean`` the best minus the mean, ``var`` the variance; ``nan`` for a group with an unscored row
    (``nan`` reward: a label-free prompt under an outcome reward)."""
    groups = rewards.double().view(-1, group_size)
    if kind == "gap":
        values = groups.max(dim=1).values - groups.min(dim=1).values
    elif kind == "maxmean":
        values = groups.max(dim=1).values - groups.mean(dim=1)
    elif kind == "var":
        values = groups.var(dim=1, unbiased=False)
    else:
        raise ValueError(f"unknown regret '{kind}'; one of {', '.join(REGRETS)}")
    scored = ~torch.isnan(groups).any(dim=1)
    return [float(v) if ok else math.nan for v, ok in zip(values.tolist(), scored.tolist())]


def selection_weights(regrets: list[float]) -> list[float]:
    """The authors' weights: each regret min-max normalised over ``regrets``, ``(r - min) / (max - min)``. Where
    every regret is the same (their formula divides by 0), each weighs 1 if it is above 0 (every prompt equally
    informative) and 0 if not (no response better than another)."""
    if not regrets:
        return []
    low, high = min(regrets), max(regrets)
    if high <= low:
        return [1.0 if r > 0 else 0.0 for r in regrets]
    return [(r - low) / (high - low) for r in regrets]


def choose_parents(regrets: dict[int, float], share: float, method: str = "weighted",
                   generator: torch.Generator | None = None) -> list[int]:
    """The rows to evolve: ``ceil(share * n)`` of the ``n`` rows of ``regrets`` (row id -> regret; ``nan`` ones
    left out), never one of weight 0 (:func:`selection_weights`): the lowest regret of several, whose responses
    differ no more than the least informative prompt's (with a 0/1 verifier, a group all right or all wrong), or a
    regret of 0; fewer when fewer weigh more than 0.

    ``weighted`` (the authors'): drawn without replacement, each draw with probability proportional to the
    normalised regret; ``top``: the highest regrets, ties in row order. In the order chosen."""
    scored = [(row, r) for row, r in regrets.items() if not math.isnan(r)]
    if not scored:
        return []
    count = math.ceil(share * len(scored))
    weights = selection_weights([r for _, r in scored])
    candidates = [(row, r, w) for (row, r), w in zip(scored, weights) if w > 0]
    count = min(count, len(candidates))
    if count == 0:
        return []
    if method == "top":
        ranked = sorted(candidates, key=lambda c: -c[1])  # stable: ties keep row order
        return [row for row, _, _ in ranked[:count]]
    if method != "weighted":
        raise ValueError(f"unknown selection '{method}'; one of {', '.join(SELECTIONS)}")
    drawn = torch.multinomial(torch.tensor([w for _, _, w in candidates], dtype=torch.double), count,
                              replacement=False, generator=generator)
    return [candidates[i][0] for i in drawn.tolist()]


def mix_weight(evolved: int, others: int, share: float) -> float:
    """The row weight that gives ``evolved`` rows together the share ``share`` of the draws against ``others`` rows
    of weight 1 (the authors' next prompt set: 0.8 evolved, 0.2 of the earlier prompts)."""
    if evolved == 0 or others == 0:
        return 1.0
    return share / (1.0 - share) * others / evolved
