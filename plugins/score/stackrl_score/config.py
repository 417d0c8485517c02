"""Every setting of the SCoRe plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.turns import check_instruction
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import RETRY_INSTRUCTION


@dataclass
class ScoreConfig(OutcomeSettings):
    section: ClassVar[str] = "score"  # its metric tells a right attempt
    # Injected between the two attempts, masked out of the loss. The built-in task's retry instruction, so that
    # the trajectory reads as its retry format (docs/roles.md); the paper asks in words to find and fix mistakes.
    instruction: str = "\n" + RETRY_INSTRUCTION + "\n"
    # The first step of stage II: rollouts of earlier steps train as stage I. 0 skips stage I.
    stage_two_step: int = 10
    # Stage I's KL coefficient on first-attempt tokens (the reimplementation's kl_coef_turn1 0.1; its second
    # attempt has none).
    first_attempt_kl: float = 0.1
    # Stage II's alpha: the second attempt earns bonus * (second correct - first correct) on top of its reward
    # (the reimplementation's rs_coef 1.0).
    bonus: float = 1.0

    def check(self):
        check_instruction("score", "instruction", self.instruction)
        if self.stage_two_step < 0:
            raise ConfigError(f"score.stage_two_step: must be 0 or more, not {self.stage_two_step}")
        if self.first_attempt_kl < 0:
            raise ConfigError(f"score.first_attempt_kl: must be 0 or more, not {self.first_attempt_kl}")
        if self.bonus < 0:
            raise ConfigError(f"score.bonus: must be 0 or more (it rewards fixes and penalises breaks), not {self.bonus}")
