"""Every setting of the RISE plugin, with the authors' values as defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.rewards import OUTCOME_REWARDS


@dataclass
class RiseConfig:
    section: ClassVar[str] = "rise"  # the config section, named in errors (a plugin reusing this config sets its own)

    # Share of each batch's groups that verify an attempt instead of solving; the authors critique 128 of every
    # 1,024 prompts (scripts/train/start_qwen3b_rise_example.sh: critique_batch_size / train_batch_size).
    verify_share: float = 0.125
    # A solution's score (verl_utils/reward/reward_func.py): its final answer right, wrong, or missing.
    correct: float = 1.0
    wrong: float = -0.5
    unanswered: float = -1.0
    # A critique's score: its verdict agrees with the attempt's correctness, disagrees, or is missing.
    agree: float = 1.0
    disagree: float = -0.5
    no_verdict: float = -1.0
    # A critique shorter than this many characters scores no_verdict, however it ends (ver_reward_func: under 800,
    # -1), so that a bare verdict does not pass for a check of the work; 0: no floor.
    min_critique_chars: int = 800
    metric: str = "exact_match"  # the built-in outcome reward that tells a right final answer
    answer_column: str = "answer"

    def __post_init__(self):
        if self.metric not in OUTCOME_REWARDS:
            raise ConfigError(f"{self.section}.metric: must be a built-in outcome reward ({', '.join(OUTCOME_REWARDS)}), not {self.metric!r}")
        if not 0 < self.verify_share < 1:
            raise ConfigError(f"{self.section}.verify_share: must be in (0, 1), not {self.verify_share}")
        if self.min_critique_chars < 0:
            raise ConfigError(f"{self.section}.min_critique_chars: must be 0 (no floor) or more, not {self.min_critique_chars}")
        if not self.correct > self.wrong:
            raise ConfigError(f"{self.section}.correct: must exceed {self.section}.wrong ({self.wrong}), not {self.correct}")
        if not self.agree > self.disagree:
            raise ConfigError(f"{self.section}.agree: must exceed {self.section}.disagree ({self.disagree}), not {self.agree}")
