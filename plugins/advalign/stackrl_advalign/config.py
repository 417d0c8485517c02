"""The `advalign:` config section."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl


@dataclass
class AdvalignConfig:
    # beta: the weight of the opponent-shaping term (the authors' IPD config for LLMs, ipd_prev_ad_align.yaml: 0.1).
    beta: float = 0.1
    # gamma: the discount of the seat's past advantages in the shaping weight (authors' ad_align_gamma: 0.9).
    gamma: float = 0.9
    # include_current: the weight sums the seat's advantages up to and including the turn (k <= t; the authors'
    # LLM code, ad_align_exclude_k_equals_t: False); false: the paper's gamma * sum over k < t.
    include_current: bool = True
    # discount: the discount of the per-turn returns the advantages are taken from (authors' discount_factor: 1.0).
    discount: float = 1.0
    # per_seat: each turn's baseline is the same seat's same turn in the group's other episodes (each agent's own
    # leave-one-out, as the authors' two trainers); false: every row of the group.
    per_seat: bool = True
    # reward_scale: per-turn rewards are divided by it before anything else (ours; the authors normalise round
    # points, the scale is the game's: the prisoner's dilemma pays at most 5 a round).
    reward_scale: float = 1.0

    def __post_init__(self):
        if self.beta < 0:
            raise stackrl.ConfigError(f"advalign.beta: must be non-negative, not {self.beta}")
        for key in ("gamma", "discount"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise stackrl.ConfigError(f"advalign.{key}: must lie in [0, 1], not {getattr(self, key)}")
        if self.reward_scale <= 0:
            raise stackrl.ConfigError(f"advalign.reward_scale: must be positive, not {self.reward_scale}")
