"""B-STaR's settings: the temperature grid it samples, the balance score's n*, the probe and the selection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional

from stackrl import ConfigError
from stackrl.rewards import OutcomeSettings

# The authors' grid: 0.50 to 1.20 in steps of 0.05 (train_bstar.sh).
AUTHORS_TEMPERATURES = [round(0.5 + 0.05 * i, 2) for i in range(15)]


@dataclass
class BStarConfig(OutcomeSettings):
    """``metric`` and ``answer_column`` (from OutcomeSettings) tell a right answer, for the balance score."""

    section: ClassVar[str] = "bstar"
    # The temperatures probed each time the configuration is chosen (the authors': 0.50..1.20 by 0.05).
    temperatures: list[float] = field(default_factory=lambda: list(AUTHORS_TEMPERATURES))
    # n* of the balance score: a query counts as fully explored with this many distinct right answers kept
    # (the authors' code: 8).
    n_star: int = 8
    # The temperature of the first steps, before any probe; null: the run's sampling temperature.
    initial_temperature: Optional[float] = None
    # Choose the temperature every `every` generation batches (the authors: every iteration).
    every: int = 1
    # The probe: this many of the last batch's problems (its first groups), each sampled `probe_samples` times at
    # every temperature of the grid (the authors: a 1k-problem dev set, 64 samples each).
    probe_problems: int = 4
    probe_samples: int = 8
    # Keep only the rows of each batch scoring above the threshold the balance score chooses on that batch (the
    # others are left out of the policy loss), as the authors select their fine-tuning data; false: only tune the
    # temperature.
    select: bool = True
    # The selection score: 1 for a right answer plus `reward_scale` times this reward component (the authors: their
    # process reward model's score / 5); null: the right answer alone. Probes have only the right answer.
    reward: Optional[str] = None
    reward_scale: float = 0.2

    def check(self) -> None:
        if not self.temperatures:
            raise ConfigError("bstar.temperatures: must list at least one temperature")
        if any(not isinstance(t, (int, float)) or t <= 0 for t in self.temperatures):
            raise ConfigError(f"bstar.temperatures: every temperature must be positive, not {self.temperatures}")
        if self.n_star < 1:
            raise ConfigError(f"bstar.n_star: must be at least 1, not {self.n_star}")
        if self.initial_temperature is not None and self.initial_temperature <= 0:
            raise ConfigError(f"bstar.initial_temperature: must be positive, not {self.initial_temperature}")
        if self.every < 1:
            raise ConfigError(f"bstar.every: must be at least 1, not {self.every}")
        if self.probe_problems < 1:
            raise ConfigError(f"bstar.probe_problems: must be at least 1, not {self.probe_problems}")
        if self.probe_samples < 1:
            raise ConfigError(f"bstar.probe_samples: must be at least 1, not {self.probe_samples}")
        if self.reward_scale < 0:
            raise ConfigError(f"bstar.reward_scale: must be non-negative, not {self.reward_scale}")
