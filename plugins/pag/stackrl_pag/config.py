"""Every setting of the PAG plugin, with the authors' values as defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.turns import check_instruction
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION


@dataclass
class PagConfig(OutcomeSettings):
    section: ClassVar[str] = "pag"
    # Answers per trajectory at most: the first, then one more after each "wrong" verdict (the authors' num_turns 2).
    turns: int = 2
    # Injected after an answer, masked out of the loss: the built-in task's judge marker, so the trajectory reads
    # as its judge format (the authors ask in words to check step by step and end with correct or wrong).
    verify_instruction: str = "\n" + JUDGE_MARKER + "\n"
    # Injected after a "wrong" verdict: the built-in retry instruction (the authors: "you said wrong, give the
    # correct solution").
    revise_instruction: str = "\n" + RETRY_INSTRUCTION + "\n"
    # A revised answer earns shaping * (its correctness - the previous answer's) on top of its correctness
    # (the authors' policy_rs with rs_coef 1.0); 0 turns the shaping off.
    shaping: float = 1.0

    def check(self):
        if self.turns < 1:
            raise ConfigError(f"pag.turns: must be at least 1 (one answer), not {self.turns}")
        if self.shaping < 0:
            raise ConfigError(f"pag.shaping: must be 0 or more, not {self.shaping}")
        for key in ("verify_instruction", "revise_instruction"):
            check_instruction("pag", key, getattr(self, key))
