"""Every setting of the CoMAS plugin; the authors' values as defaults where they have one."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError
from stackrl.blocks.judges import Mode


@dataclass
class ComasConfig:
    # Share of each batch's groups whose rows critique another agent's solution (one on-policy attempt at the
    # group's question); the others solve. The authors' rounds have as many evaluations as solutions (each of the
    # N agents' solutions gets one evaluation), so half the rows each.
    critique_share: float = 0.5
    # How the scorer gives its verdict on a solution after reading a critique of it: written (generate: the
    # verdict word, 1 for correct, 0 for wrong, nothing readable malformed) or by likelihood (P(correct) against
    # P(wrong) after "Verdict:", a score in [0, 1], never malformed). The authors' scorer writes its score.
    scorer: Mode = Mode.generate
    scorer_temperature: float = 1.0  # generate: the authors sample every turn at 1.0; 0 = greedy
    scorer_max_tokens: int = 128  # generate: room to finish a check the critique left unfinished, then the verdict
    # The reward of both the solution and the critique when the score cannot be read (the authors' 0.0; their
    # scorer's own -1 for it is not trained here: scorer turns are not rows of the batch).
    malformed: float = 0.0

    def __post_init__(self):
        if not 0 < self.critique_share < 1:
            raise ConfigError(f"comas.critique_share: must be in (0, 1), not {self.critique_share}")
        self.scorer = Mode(self.scorer) if isinstance(self.scorer, str) else self.scorer
        if self.scorer_temperature < 0:
            raise ConfigError(f"comas.scorer_temperature: must be 0 (greedy) or more, not {self.scorer_temperature}")
        if self.scorer_max_tokens < 1:
            raise ConfigError(f"comas.scorer_max_tokens: must be at least 1, not {self.scorer_max_tokens}")
        if not 0 <= self.malformed <= 1:
            raise ConfigError(f"comas.malformed: must be in [0, 1], the range of the normalised score, not {self.malformed}")
