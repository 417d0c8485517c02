"""ReST-GRPO's settings, with the authors' values as defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass

from stackrl import ConfigError


@dataclass
class RestGrpoConfig:
    reward: str = "exact_match"  # the reward component whose spread within a group decides (the authors' test pass rate)
    # A problem whose group's rewards have a (population) standard deviation below this is left out until the next
    # iteration: GRPO learns nothing from it (the authors' std_accept_threshold_grpo, 0.05).
    std_threshold: float = 0.05
    # A kept problem whose best completion scores at least this also gives partial-solution problems: its question
    # followed by the first lines of that completion (the authors' completion_accept_threshold_grpo, 0.9).
    accept_threshold: float = 0.9
    # How many partial-solution problems a kept problem gives: ceil(partial_ratio x the completion's lines), drawn
    # with replacement, the prefix of k lines with weight alpha^(k-1) (the authors' n_sample 0.5 and alpha 0.95).
    # 0 assembles none.
    partial_ratio: float = 0.5
    alpha: float = 0.95
    # One ReST iteration, in training steps: a problem's first group in an iteration is its sampling pass, and the
    # filter keeps it for the rest of the iteration or leaves it out; at the next iteration every problem left out
    # is sampled again and the iteration's partial-solution problems not yet drawn retire.
    iteration_steps: int = 50

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
