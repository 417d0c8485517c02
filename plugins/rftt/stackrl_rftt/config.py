"""RFTT's settings (the config section ``rftt:``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError


@dataclass
class RfttConfig:
    """The functional tokens, the warm-up that teaches them and the columns it reads."""

    verify_token: str = "<verify>"  # opens a check of the attempt above it (authors' token); list it in model.add_tokens
    refine_token: str = "<refine>"  # opens a fixed solution after a check that found a wrong line (authors' token)
    warmup_step: int = 2  # the warm-up runs after this step, on the attempts of steps 1..warmup_step (ours)
    sft_learning_rate: float = 1.0e-3  # the built-in model needs far more than the authors' 7e-6 to move (ours)
    sft_epochs: int = 4  # passes over the annotated attempts (the authors' SFT: 10 epochs at 7e-6; ours: fewer, larger steps)
    sft_batch_size: Optional[int] = None  # pairs per optimizer step; null: per_device_train_batch_size
    answer_column: str = "answer"  # the reference answer: the outcome reward and the attempts' annotation
    solution_column: str = "solution"  # the reference solution the <refine> part of a wrong attempt's target holds

    def __post_init__(self):
        for key in ("verify_token", "refine_token"):
            value = getattr(self, key)
            if not value or value != value.strip():
                raise ConfigError(f"rftt.{key}: must be a non-empty token without surrounding spaces, not {value!r}")
        if self.verify_token == self.refine_token:
            raise ConfigError(f"rftt.refine_token: must differ from rftt.verify_token ({self.verify_token!r})")
        if self.warmup_step < 1:
            raise ConfigError(f"rftt.warmup_step: must be at least 1, not {self.warmup_step}")
        if self.sft_epochs < 1:
            raise ConfigError(f"rftt.sft_epochs: must be at least 1, not {self.sft_epochs}")
        if not self.sft_learning_rate > 0:
            raise ConfigError(f"rftt.sft_learning_rate: must be positive, not {self.sft_learning_rate}")
        if self.sft_batch_size is not None and self.sft_batch_size < 1:
            raise ConfigError(f"rftt.sft_batch_size: must be at least 1 or null, not {self.sft_batch_size}")
