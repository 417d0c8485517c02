"""SEC's settings."""

from __future__ import annotations

import math
from dataclasses import dataclass

from stackrl import ConfigError

ABSENT = ("toward_zero", "unchanged")


@dataclass
class SecConfig:
    alpha: float = 0.5  # the step of each category's value toward its reward (the paper's and the authors' 0.5)
    temperature: float = 1.0  # tau of the softmax over values: 1.0 in the paper's Countdown and Zebra runs, 0.4 in math
    # A category absent from a batch: its value moves toward 0, as in the authors' code ("toward_zero"), or keeps
    # its value, as the paper's update of the sampled categories alone reads ("unchanged").
    absent_categories: str = "toward_zero"

    def __post_init__(self):
        if not 0 < self.alpha <= 1:
            raise ConfigError(f"sec.alpha: must lie in (0, 1], not {self.alpha}")
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ConfigError(f"sec.temperature: must be a positive number, not {self.temperature}")
        if self.absent_categories not in ABSENT:
            raise ConfigError(f"sec.absent_categories: must be one of {', '.join(ABSENT)}, not {self.absent_categories!r}")
