"""ExIt's settings. The criterion (a group's reward variance) is the paper's; the numbers are ours: the paper's
buffer settings were not found (see the README)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from stackrl import ConfigError


@dataclass
class ExitConfig:
    reward: str = "exact_match"
    """The reward component whose variance within a group scores the group's starting point (the paper: the task's
    return)."""
    per_batch: int = 2
    """New self-iteration tasks a generation batch gives at most: one from each of its most learnable groups."""
    min_score: float = 0.0
    """A group gives a task, and a buffered task stays, only with a learnability above this: a group whose rewards
    all agree gives GRPO no signal."""
    capacity: int = 64
    """Buffered tasks kept at most; beyond it the lowest-scored retire."""
    replay_weight: float = 1.0
    """The pool weight of the buffer's most learnable task (a dataset problem weighs 1); the others weigh in
    proportion to their score."""
    max_depth: int = 4
    """The most earlier attempts a task shows: a group of a task at this depth gives no further task."""

    def __post_init__(self):
        if self.per_batch < 1:
            raise ConfigError(f"exit.per_batch: must be at least 1, not {self.per_batch}")
        if not (self.min_score >= 0 and math.isfinite(self.min_score)):
            raise ConfigError(f"exit.min_score: must be a number >= 0, not {self.min_score}")
        if self.capacity < 1:
            raise ConfigError(f"exit.capacity: must be at least 1, not {self.capacity}")
        if not (self.replay_weight > 0 and math.isfinite(self.replay_weight)):
            raise ConfigError(f"exit.replay_weight: must be a positive number, not {self.replay_weight}")
        if self.max_depth < 1:
            raise ConfigError(f"exit.max_depth: must be at least 1, not {self.max_depth}")
