"""Every setting of the SWIRL plugin; the authors' values where their code has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError

PHASES = ("forward", "inverse")


@dataclass
class SwirlConfig:
    section: ClassVar[str] = "swirl"
    # Optimizer steps per phase before the other model is trained: each phase starts by freezing the policy as the
    # opposite model (the authors run each phase as its own GRPO run against the other model's checkpoint).
    phase_steps: int = 1
    # The phase of the first steps: "forward" (variational information maximisation, the forward world model
    # rewarded by the frozen inverse model) or "inverse" (ELBO maximisation, the inverse model rewarded by the
    # frozen forward model). The authors train the forward model first (their iter1 release is its GRPO run).
    first: str = "forward"
    # The reward is the frozen model's mean per-token log-probability of the target, clamped from below here (the
    # authors' reward modules: -10, "TokenRewardClip10").
    floor: float = -10.0
    # The data column holding each question's worked solution, whose lines are the transitions' actions.
    solution_column: str = "solution"

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        if self.phase_steps < 1:
            raise ConfigError(f"swirl.phase_steps: must be at least 1, not {self.phase_steps}")
        if self.first not in PHASES:
            raise ConfigError(f"swirl.first: must be one of forward, inverse, not '{self.first}'")
        if not self.floor < 0:
            raise ConfigError(f"swirl.floor: must be negative (a log-probability), not {self.floor}")
