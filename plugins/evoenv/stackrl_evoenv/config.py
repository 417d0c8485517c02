"""EvoEnv's settings: the proposer's request, the contract's instance count, the sandbox limits, the solver's tries
and the pass-rate band."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Optional

from stackrl import ConfigError
from stackrl.answers import AnswerSettings


@dataclass
class EvoEnvConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify.
    section: ClassVar[str] = "evoenv"
    # The proposer's one prompt. None: the contract, the seed environment and the marker "Environment:"
    # (stackrl_evoenv.screening.request_text).
    topic: Optional[str] = None
    problem_column: str = "question"  # the dataset column of a problem's text; an instance's question goes there
    proposer_share: float = 0.25  # the share of a batch's problems that are the proposer's row (once instances wait)
    instances: int = 8  # COUNT: the instances an environment prints per run, calibrated on and added to the pool
    solver_samples: int = 4  # the solver's tries at each instance for the pass rate
    solver_sampling: Dict[str, Any] = field(default_factory=dict)  # ctx.generate overrides; {}: the run's sampling
    min_pass: float = 0.1  # the band: an environment is kept when min_pass <= pass rate <= max_pass
    max_pass: float = 0.8
    check_known: bool = True  # a question the built-in task can read must carry its true answer
    stage_credit: float = 0.0  # a rejected environment's reward: this times the share of the four stages it passed
    timeout_s: float = 5.0  # each run's wall-clock limit
    cpu_s: float = 5.0  # each run's CPU-time limit
    train_on_dataset: bool = False  # the dataset's own problems are drawn too (zero-data: the authors have none)

    def __post_init__(self):
        super().__post_init__()
        for key in ("instances", "solver_samples"):
            if getattr(self, key) < 1:
                raise ConfigError(f"evoenv.{key}: must be at least 1, not {getattr(self, key)}")
        if not 0.0 < self.proposer_share < 1.0:
            raise ConfigError(f"evoenv.proposer_share: must lie strictly between 0 and 1, not {self.proposer_share}")
        if not 0.0 <= self.min_pass <= self.max_pass <= 1.0:
            raise ConfigError(f"evoenv.min_pass: the band must satisfy 0 <= min_pass <= max_pass <= 1, not "
                              f"[{self.min_pass}, {self.max_pass}]")
        if self.max_pass >= 1.0:
            raise ConfigError("evoenv.max_pass: must be below 1, or an environment the solver always solves is kept")
        if not (math.isfinite(self.stage_credit) and 0.0 <= self.stage_credit < 1.0):
            raise ConfigError(f"evoenv.stage_credit: must lie in [0, 1), below an accepted environment's 1, not "
                              f"{self.stage_credit}")
        for key in ("timeout_s", "cpu_s"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"evoenv.{key}: must be positive, not {getattr(self, key)}")
        if self.topic is not None and not self.topic.strip():
            raise ConfigError("evoenv.topic: empty; give the proposer's prompt, or null for the built-in request")
