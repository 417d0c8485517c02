"""The `gtpo:` config section."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl


@dataclass
class GtpoConfig:
    # gamma: the discount of the turn rewards in each turn's return G_t = r_t + gamma G_{t+1} (ours: 0.9; the
    # paper's value was not read, its code is not public).
    gamma: float = 0.9
    # shaping_weight: a failed row's outcome gains shaping_weight x the mean similarity of its code to the group's
    # successful rows' code (ours: 0.5, so a shaped failure stays below a success).
    shaping_weight: float = 0.5
    # success: a row whose total reward is at least this is successful; below, it failed and may be shaped (the
    # paper's binary outcome: 1).
    success: float = 1.0

    def __post_init__(self):
        if not 0.0 <= self.gamma <= 1.0:
            raise stackrl.ConfigError(f"gtpo.gamma: must lie in [0, 1], not {self.gamma}")
        if self.shaping_weight < 0:
            raise stackrl.ConfigError(f"gtpo.shaping_weight: must be non-negative, not {self.shaping_weight}")
        if self.shaping_weight >= self.success > 0:
            raise stackrl.ConfigError(
                f"gtpo.shaping_weight: {self.shaping_weight} would let a failed row's shaped outcome reach a "
                f"success ({self.success}); keep it below gtpo.success"
            )
