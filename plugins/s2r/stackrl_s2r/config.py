"""Every setting of the S^2R plugin, with the authors' values as defaults where their code has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.turns import check_instruction
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION

LEVELS = ("process", "outcome")


@dataclass
class S2rConfig(OutcomeSettings):
    section: ClassVar[str] = "s2r"  # its metric tells a right answer
    # "process": every turn credited by its own reward less its history's running mean (the authors'
    # --use_instance_level False); "outcome": the final answer's reward, leave-one-out in its group, on every
    # token (--use_instance_level True).
    level: str = "process"
    # Answers per trajectory at most, the first and one more after each "wrong" verdict; every answer is verified,
    # the last one's verdict ends the row (the authors' rows run until a "correct" verdict or the length limit).
    answers: int = 3
    # Injected after an answer, masked out of the loss: the built-in judge marker (the authors' model writes
    # "Wait," itself, taught by their SFT data).
    verify_instruction: str = "\n" + JUDGE_MARKER + "\n"
    # Injected after a "wrong" verdict, masked out of the loss: the built-in retry instruction (theirs: "Let me try
    # again.", written by the model).
    revise_instruction: str = "\n" + RETRY_INSTRUCTION + "\n"
    # Process level: a verification of a right answer has its advantage multiplied by this (the authors' veri
    # bonus, 2); 1 turns it off.
    verify_bonus: float = 2.0
    # Process level: an answer whose correctness differs from the previous answer's has its advantage multiplied
    # by this (the authors' bonus, 2); 1 turns it off.
    change_bonus: float = 2.0
    # Process level: a history's running mean is the baseline once it has this many rewards, 0 before (the
    # authors' 10).
    min_count: int = 10

    def check(self):
        if self.level not in LEVELS:
            raise ConfigError(f"s2r.level: must be one of {', '.join(LEVELS)}, not {self.level!r}")
        if self.answers < 1:
            raise ConfigError(f"s2r.answers: must be at least 1 (one answer), not {self.answers}")
        for key in ("verify_bonus", "change_bonus"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"s2r.{key}: must be more than 0, not {getattr(self, key)}")
        if self.min_count < 1:
            raise ConfigError(f"s2r.min_count: must be at least 1, not {self.min_count}")
        for key in ("verify_instruction", "revise_instruction"):
            check_instruction("s2r", key, getattr(self, key))
