"""Every setting of the PAG plugin, with the authors' values as defaults."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError
from stackrl.rewards import OUTCOME_REWARDS
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION


@dataclass
class PagConfig:
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
    metric: str = "exact_match"  # the built-in outcome reward that tells a right answer
    answer_column: str = "answer"

    def __post_init__(self):
        if self.turns < 1:
            raise ConfigError(f"pag.turns: must be at least 1 (one answer), not {self.turns}")
        if self.metric not in OUTCOME_REWARDS:
            raise ConfigError(f"pag.metric: must be a built-in outcome reward ({', '.join(OUTCOME_REWARDS)}), not {self.metric!r}")
        if self.shaping < 0:
            raise ConfigError(f"pag.shaping: must be 0 or more, not {self.shaping}")
        for key in ("verify_instruction", "revise_instruction"):
            if not getattr(self, key).strip():
                raise ConfigError(f"pag.{key}: must hold the instruction to inject")
