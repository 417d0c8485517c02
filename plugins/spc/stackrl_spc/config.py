"""Every setting of the SPC plugin; the authors' values as defaults where they have one (README, "where this
differs")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError


@dataclass
class SpcConfig:
    # Share of each batch's groups whose rows play the sneaky generator (a right solution shown, one line of it made
    # wrong); the other groups' rows play the critic. Ours: the authors train two copies on separate data.
    sneaky_share: float = 0.5
    # Share of the critic groups that judge the right solution itself instead of a corruption of it, so that calling
    # everything wrong does not pay (ours: the authors' critic is to tell correct from incorrect steps; how they
    # balance the two in its training data is not in the public code).
    correct_share: float = 0.5
    # Corruptions drawn from the policy for each critic group; the first valid one is judged, and with none valid
    # the task's rule corrupter (stackrl.tasks.slip) makes one (ours: the authors' critic plays only valid ones).
    tries: int = 4
    # The sneaky row's reward when its corruption is not valid (not exactly one wrong line of the question's chain).
    # The authors play only valid corruptions and drop the others; null drops them here too (unscored rows).
    invalid_reward: Optional[float] = -1.0
    # The critic verdict that decides a sneaky row's game: sampled from the policy in the judge role, not trained.
    critic_temperature: float = 0.0  # 0 = greedy (ours; the authors' sampling settings are not public)
    critic_max_tokens: int = 128  # a judge's check of a 4-step attempt runs to about 120 tokens

    def __post_init__(self):
        if not 0 < self.sneaky_share < 1:
            raise ConfigError(f"spc.sneaky_share: must be in (0, 1), both roles need groups, not {self.sneaky_share}")
        if not 0 <= self.correct_share < 1:
            raise ConfigError(f"spc.correct_share: must be in [0, 1), some critic groups must judge a corruption, "
                              f"not {self.correct_share}")
        if self.tries < 1:
            raise ConfigError(f"spc.tries: must be at least 1, not {self.tries}")
        if self.invalid_reward is not None and not -1 <= self.invalid_reward <= 1:
            raise ConfigError(f"spc.invalid_reward: must be in [-1, 1] (the game's range) or null, not {self.invalid_reward}")
        if self.critic_temperature < 0:
            raise ConfigError(f"spc.critic_temperature: must be 0 (greedy) or more, not {self.critic_temperature}")
        if self.critic_max_tokens < 1:
            raise ConfigError(f"spc.critic_max_tokens: must be at least 1, not {self.critic_max_tokens}")
