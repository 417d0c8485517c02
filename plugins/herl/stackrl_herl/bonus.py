"""HeRL's numbers: the bonus for a response's potential for improvement under guidance, which guided responses
take rows of their group, and the weight of a guided row's policy gradient.

Written from the authors' trainer (sikelifei/HeRL, ``verl/trainer/ppo/ray_trainer.py``, ``_augment_with_rewrite_he``)
and policy loss (``verl/trainer/ppo/core_algos.py``, ``mixpolicy_vanilla``).
"""

from __future__ import annotations


def improvement_bonus(original: float, guided: float, alpha: float) -> float:
    """The bonus of a response whose guided regeneration scored ``guided`` and which itself scored ``original``:
    ``alpha * (guided - original)``, added to its reward (the authors' ``reward_shaping_alpha``). Negative where the
    guided regeneration did worse."""
    return alpha * (guided - original)


def chosen(guided_scores: list[float], best: float, replace: int) -> list[int]:
    """Which guided regenerations of a group take its rows: up to ``replace`` of them, those scoring above the
    group's ``best`` original first (highest first), then, to fill the count, those scoring as well as it. Indices
    into ``guided_scores``; ties keep their order."""
    order = sorted(range(len(guided_scores)), key=lambda i: -guided_scores[i])
    better = [i for i in order if guided_scores[i] > best]
    level = [i for i in order if guided_scores[i] == best]
    return (better + level)[:replace]


def guided_weight(gamma: float) -> float:
    """The factor on a guided row's policy gradient: the authors weight its token ratio ``r`` (policy over the
    policy that wrote it, both on the guided prompt) as ``r / (r + gamma)``, unclipped, whose gradient at ``r = 1``
    (one update per rollout) is ``gamma / (1 + gamma)^2`` times the plain one; ``gamma`` 0 leaves ``r`` itself,
    factor 1."""
    return 1.0 if gamma == 0 else gamma / (1.0 + gamma) ** 2
