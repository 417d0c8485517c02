"""Every setting of the MARS plugin; the defaults are the authors' self-play configs (thu-nics/MARS)."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError

SCALES = ("seat", "batch", "none")


@dataclass
class MarsConfig:
    # Discount of a turn's return over the seat's later turns, G_k = r_k + gamma * G_{k+1}. The authors' configs
    # leave it at their default, 1.0 (undiscounted reward-to-go).
    gamma: float = 1.0
    # What a seat's centred returns are divided by: "seat", that seat's own standard deviation (the paper's
    # agent-specific normalisation); "batch", the standard deviation of every seat's centred returns pooled (the
    # authors' code, which whitens the batch after centring per player); "none", nothing (centring alone).
    scale: str = "seat"

    def __post_init__(self):
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"mars.gamma: must lie in [0, 1], not {self.gamma}")
        if self.scale not in SCALES:
            raise ConfigError(f"mars.scale: must be one of {', '.join(SCALES)}, not {self.scale!r}")
