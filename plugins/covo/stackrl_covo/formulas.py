"""CoVo's formulas on tensors: distances, consistency, volatility, their aggregation per answer, curiosity.

For a trajectory of ``T`` steps in a group with ``K`` distinct answers, ``D[i, k]`` is the perplexity of the probe
"the answer is y_k" after step ``i``: the smaller, the closer the state is to answer ``k``. With ``j`` the
trajectory's own answer and ``r_i = D[i, j] / min_{k != j} D[i, k]``:

- consistency ``Con = #{i : r_i < 1} / T``: the share of states nearest to the own answer;
- volatility ``Vol = 1 - L / T``, ``L`` the length of the final run of states with ``r_i <= 1``: how late the
  trajectory last leaned towards another answer.

Over the ``n`` trajectories that end in one answer, ``RiV = || mean_i (Con_i cos Vol_i, Con_i sin Vol_i) ||_2``
(volatility as an angle in radians) and ``RiL = mean Con - mean Vol``.

The aggregates are computed in float64 with the authors' order of operations (per-trajectory ``math`` cosines,
numpy means): an answer whose aggregate lies exactly at a binary threshold is then decided as in their code.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def perplexity(logprobs: torch.Tensor) -> torch.Tensor:
    """``exp(-mean log p)`` of a span's token log-probs."""
    return torch.exp(-logprobs.mean())


def normalise_rows(distances: torch.Tensor) -> torch.Tensor:
    """Each row (one state's distances to the ``K`` answers) divided by its L1 norm."""
    return distances / distances.abs().sum(dim=-1, keepdim=True)


def consistency_volatility(distances: torch.Tensor, own: int) -> tuple[float, float]:
    """``(Con, Vol)`` of one trajectory from its ``(T, K)`` distances, ``own`` its answer's column (``K >= 2``)."""
    others = torch.cat([distances[:, :own], distances[:, own + 1 :]], dim=1)
    ratio = distances[:, own] / others.min(dim=1).values
    steps = len(ratio)
    consistency = (ratio < 1).sum().item() / steps
    leaning_away = (ratio > 1).nonzero()
    final_run = steps - 1 - leaning_away[-1].item() if len(leaning_away) else steps
    return consistency, 1 - final_run / steps


def riv(consistency, volatility) -> float:
    """Vectorial aggregation: the length of the mean of the vectors ``Con (cos Vol, sin Vol)``."""
    pairs = list(zip(_floats(consistency), _floats(volatility)))
    x = np.mean([c * math.cos(v) for c, v in pairs])
    y = np.mean([c * math.sin(v) for c, v in pairs])
    return math.sqrt(x**2 + y**2)


def ril(consistency, volatility) -> float:
    """Linear aggregation: mean consistency minus mean volatility."""
    return float(np.mean(_floats(consistency)) - np.mean(_floats(volatility)))


def _floats(values) -> list[float]:
    return [float(v) for v in values]


def group_rewards(
    answer_index: list[int | None], distances: list[torch.Tensor | None], aggregate, threshold: float | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One group's rewards, consistencies and volatilities, float64.

    ``answer_index[i]`` is trajectory ``i``'s answer among the group's distinct answers (``None``: no answer),
    ``distances[i]`` its ``(T, K)`` distances. Each answer gets the ``aggregate`` (:func:`riv` or :func:`ril`)
    of its trajectories; a trajectory's reward is its answer's aggregate, or with a ``threshold`` 1 where that
    reaches the threshold and 0 elsewhere. Trajectories without an answer, and every trajectory of a group with
    fewer than two distinct answers (nothing to compare with), get 0.
    """
    n = len(answer_index)
    rewards, consistency, volatility = [0.0] * n, [0.0] * n, [0.0] * n
    answers = sorted({a for a in answer_index if a is not None})
    if len(answers) >= 2:
        answered = [i for i in range(n) if answer_index[i] is not None]
        for i in answered:
            consistency[i], volatility[i] = consistency_volatility(normalise_rows(distances[i]), answer_index[i])
        for answer in answers:
            rows = [i for i in answered if answer_index[i] == answer]
            score = aggregate([consistency[i] for i in rows], [volatility[i] for i in rows])
            for i in rows:
                rewards[i] = float(score >= threshold) if threshold is not None else score
    return tuple(torch.tensor(values, dtype=torch.float64) for values in (rewards, consistency, volatility))


def step_curiosity(logprobs: torch.Tensor) -> float:
    """One step's curiosity: ``ppl - ln(KL(P || U)^(1/3) + 1)`` over the step's token log-probs.

    ``P`` is each token's share of the step's surprisal (``log p_t / sum log p``), ``U`` uniform over the tokens:
    the penalty grows when the surprise sits on a few tokens.
    """
    total = logprobs.sum()
    if total == 0:  # every token certain: no surprisal to share out
        return perplexity(logprobs).item()
    shares = logprobs / total
    kl = torch.xlogy(shares, shares * len(shares)).sum().clamp(min=0)
    return (perplexity(logprobs) - torch.log(kl ** (1 / 3) + 1)).item()


def curiosity_bonus(curiosity: float, threshold: float, bonus: float) -> float:
    """The bonus of a trajectory whose mean step curiosity exceeds ``threshold``."""
    return bonus if curiosity > threshold else 0.0

