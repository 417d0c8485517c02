"""Every setting of the SDRL plugin."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError
from stackrl.answers import AnswerSettings
from stackrl.rewards import OUTCOME_REWARDS
from stackrl.tasks import RETRY_INSTRUCTION

# On the built-in task each candidate is shown as an earlier attempt in the retry format, one after the other
# (docs/roles.md: a further turn takes the last retry prompt as its prompt), so the debate prompt reads as
# "question, attempt, Try again., attempt, Try again." and the reply is a new solution.
CANDIDATE_TEMPLATE = "{candidate}\n" + RETRY_INSTRUCTION + "\n"


@dataclass
class SdrlConfig(AnswerSettings):
    debate_share: float = 0.5  # share of each batch's groups that answer after a debate context; the rest solve alone
    candidates: int = 4  # first-turn solutions sampled per debate group, the pool the context is chosen from
    context_size: int = 2  # candidates shown in the context, distinct final answers first
    # One candidate as the context shows it; the context is the prompt followed by each shown candidate.
    candidate_template: str = CANDIDATE_TEMPLATE
    metric: str = "exact_match"  # the built-in outcome reward that tells a right candidate, for the logged figures
    answer_column: str = "answer"

    def __post_init__(self):
        if not 0 < self.debate_share <= 1:
            raise ConfigError(f"sdrl.debate_share: must be in (0, 1], not {self.debate_share}")
        if self.candidates < 1:
            raise ConfigError(f"sdrl.candidates: must be at least 1, not {self.candidates}")
        if not 1 <= self.context_size <= self.candidates:
            raise ConfigError(f"sdrl.context_size: must be between 1 and sdrl.candidates ({self.candidates}), not {self.context_size}")
        if "{candidate}" not in self.candidate_template:
            raise ConfigError("sdrl.candidate_template: must contain {candidate}")
        if self.metric not in OUTCOME_REWARDS:
            raise ConfigError(f"sdrl.metric: must be a built-in outcome reward ({', '.join(OUTCOME_REWARDS)}), not {self.metric!r}")
