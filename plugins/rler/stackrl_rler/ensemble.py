"""RLER's ensembled reward for one prompt: the votes of several reward estimators (the policy's own group, other
models' answers) pooled in one answer space, the reward interpolated between the ensemble's hard label and its soft
share, and the disagreement that decides whether the group trains.

Estimator ``m`` answers the prompt ``n_m`` times; ``p_m(k)`` is the share of its answers in cluster ``k`` (answers
clustered together across estimators, as ``stackrl.answers`` clusters a group). With weights ``w_m``:

    p(k)  = sum_m w_m p_m(k) / sum_m w_m                  the ensemble's answer distribution
    a*    = argmax_k p(k),  c = p(a*)                     its label and confidence
    r_i   = c * [k_i = a*] + (1 - c) * p(k_i)             adaptive interpolation (0 for a row without answer)
    d     = sum_m w_m [top_m != a*] / sum_m w_m           disagreement: the weight of estimators whose own top
                                                          answer is not the label (no answer: disagrees)
    keep  = c - d >= margin                               the group trains only where confidence outweighs
                                                          disagreement
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrl.answers import group_answers

# How the reward is read from the ensemble's distribution.
INTERPOLATIONS = ("adaptive", "hard", "soft")


@dataclass(frozen=True)
class Ensembled:
    """One group's ensembled reward: ``rewards`` per policy row, ``label`` (None: no estimator answered),
    ``confidence`` c, ``disagreement`` d, each estimator's ``top`` answer (None: none), ``shares`` p(k_i) per row
    and the policy's own ``self_shares`` p_policy(k_i) per row (its self-reward, the coupling the ensemble loosens)."""

    rewards: list[float]
    label: str | None
    confidence: float
    disagreement: float
    top: dict[str, str | None]
    shares: list[float]
    self_shares: list[float]

    def kept(self, margin: float) -> bool:
        return self.confidence - self.disagreement >= margin


def ensemble_reward(rows: list[str | None], votes: dict[str, list[str | None]], weights: dict[str, float],
                    *, interpolation: str = "adaptive", math_verify: bool = True) -> Ensembled:
    """The reward of each of the policy's ``rows`` (their answers) from the estimators' ``votes`` (name -> its
    answers to the prompt; the policy's own votes are ``rows`` where it is an estimator), weighted by ``weights``
    (name -> weight, 1 where absent)."""
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {', '.join(INTERPOLATIONS)}, not '{interpolation}'")
    names = list(votes)
    flat = list(rows) + [a for name in names for a in votes[name]]
    clusters = group_answers(flat, math_verify)
    row_index, rest = clusters.index[: len(rows)], clusters.index[len(rows):]
    distribution = [0.0] * len(clusters.distinct)
    own: dict[str, list[float]] = {}
    total = sum(weights.get(name, 1.0) for name in names)
    for name in names:
        mine, rest = rest[: len(votes[name])], rest[len(votes[name]):]
        shares = [0.0] * len(clusters.distinct)
        for k in mine:
            if k is not None:
                shares[k] += 1.0 / len(mine)
        own[name] = shares
        for k, share in enumerate(shares):
            distribution[k] += weights.get(name, 1.0) * share / total
    label_k = max(range(len(distribution)), key=lambda k: (distribution[k], -k)) if distribution else None
    confidence = distribution[label_k] if label_k is not None else 0.0
    top_k = {name: max(range(len(shares)), key=lambda k: (shares[k], -k)) if any(shares) else None
             for name, shares in own.items()}
    against = sum(weights.get(name, 1.0) for name in names if top_k[name] is None or top_k[name] != label_k)
    shares = [0.0 if k is None else distribution[k] for k in row_index]
    hard = [float(k is not None and k == label_k) for k in row_index]
    if interpolation == "hard":
        rewards = hard
    elif interpolation == "soft":
        rewards = shares
    else:
        rewards = [confidence * h + (1.0 - confidence) * s for h, s in zip(hard, shares)]
    policy = own.get("policy")
    self_shares = [0.0 if k is None or policy is None else policy[k] for k in row_index]
    return Ensembled(rewards=rewards, label=None if label_k is None else clusters.distinct[label_k],
                     confidence=confidence, disagreement=against / total if total else 1.0,
                     top={name: None if k is None else clusters.distinct[k] for name, k in top_k.items()},
                     shares=shares, self_shares=self_shares)
