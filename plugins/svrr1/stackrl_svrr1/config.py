"""Every setting of the SVR-R1 plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.turns import check_instruction
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION


@dataclass
class SvrR1Config(OutcomeSettings):
    section: ClassVar[str] = "svrr1"  # its metric tells a right final answer
    # The turn cap: answers per trajectory at most, the first and one rethink after each "no" (the abstract's
    # "second-chance rethink": 2).
    turns: int = 2
    # Injected after an answer, masked out of the loss: the built-in task's judge marker, whose check ends in the
    # verdict line read as the self-verdict ("correct" is yes, "wrong" is no).
    verify_instruction: str = "\n" + JUDGE_MARKER + "\n"
    # Injected after a "no", masked out of the loss: the built-in retry instruction, the rethink's cue.
    rethink_instruction: str = "\n" + RETRY_INSTRUCTION + "\n"
    # Every answer gets its verdict, the one at the cap too (which then finalises whatever it says); false leaves
    # the answer at the cap unverified, as PAG does.
    verify_last: bool = True

    def check(self):
        if self.turns < 1:
            raise ConfigError(f"svrr1.turns: must be at least 1 (one answer), not {self.turns}")
        for key in ("verify_instruction", "rethink_instruction"):
            check_instruction("svrr1", key, getattr(self, key))
