"""ReST-GRPO's settings, with the authors' values as defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass

from stackrl import ConfigError


@dataclass
class RestGrpoConfig:
    """The defaults are the authors' (``process_gen_data.py``: ``std_accept_threshold_grpo``,
    ``completion_accept_threshold_grpo``, ``n_sample``, ``alpha``)."""

    reward: str = "exact_match"
    """The reward component whose spread within a group decides (the authors': the share of tests passed)."""
    std_threshold: float = 0.05
    """A group's rewards with a population std below it leave the problem out until the next iteration: GRPO
    learns nothing from it."""
    accept_threshold: float = 0.9
    """A kept problem whose best completion scores at least this gives partial solutions: its question followed
    by the first lines of that completion."""
    partial_ratio: float = 0.5
    """A kept problem gives ceil(partial_ratio x the completion's lines) partial solutions, drawn with
    replacement; 0 gives none."""
    alpha: float = 0.95
    """The prefix of k lines is drawn with weight alpha ^ (k - 1): short prefixes more often."""
    iteration_steps: int = 50
    """One ReST iteration, in steps: a problem's first group in it samples the problem, and the filter keeps it or
    leaves it out for the rest of the iteration; then every problem left out is sampled again, and the partial
    solutions not yet drawn retire."""

    def __post_init__(self):
        if not (self.std_threshold >= 0 and math.isfinite(self.std_threshold)):
            raise ConfigError(f"restgrpo.std_threshold: must be a number >= 0, not {self.std_threshold}")
        if not math.isfinite(self.accept_threshold):
            raise ConfigError(f"restgrpo.accept_threshold: must be a finite number, not {self.accept_threshold}")
        if not 0 <= self.partial_ratio <= 1:
            raise ConfigError(f"restgrpo.partial_ratio: must lie in [0, 1], not {self.partial_ratio}")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"restgrpo.alpha: must lie in (0, 1), not {self.alpha}")
        if self.iteration_steps < 1:
            raise ConfigError(f"restgrpo.iteration_steps: must be at least 1, not {self.iteration_steps}")
