"""Every setting of the RRPO plugin."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError
from stackrl.rewards import OUTCOME_REWARDS

RESETS = ("random", "self", "oracle")


@dataclass
class RrpoConfig:
    # Where a failed attempt is reset: "random", a step drawn uniformly (RRPO); "self", the step the policy itself
    # judges wrong (SRPO; the policy must answer the built-in task's judge format, as stackrl/arith-skills does);
    # "oracle", the first line wrong in itself (the built-in task's format only).
    reset: str = "random"
    reset_share: float = 0.5  # share of each batch's groups that continue a failed attempt; the rest solve afresh
    attempts: int = 4  # first attempts sampled per reset group, to find a failed one; none failed: the group solves
    correct_reward: str = "exact_match"  # the component telling a correct answer; also judges first attempts
    answer_column: str = "answer"
    seed: int = 0  # of the random resets; the same on every process

    def __post_init__(self):
        if self.reset not in RESETS:
            raise ConfigError(f"rrpo.reset: must be one of {', '.join(RESETS)}, not {self.reset!r}")
        if not 0 < self.reset_share <= 1:
            raise ConfigError(f"rrpo.reset_share: must be in (0, 1], not {self.reset_share}")
        if self.attempts < 1:
            raise ConfigError(f"rrpo.attempts: must be at least 1, not {self.attempts}")
        if self.correct_reward not in OUTCOME_REWARDS:
            raise ConfigError(
                f"rrpo.correct_reward: first attempts are judged in the sample stage, by a built-in outcome reward "
                f"({', '.join(OUTCOME_REWARDS)}), not {self.correct_reward!r}"
            )
