"""Every setting of the SDRL plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

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
    section: ClassVar[str] = "sdrl"
    debate_share: float = 0.5  # share of each batch's groups that answer after a debate context; the rest solve alone
    # First-turn solutions per debate group, the pool the context is chosen from; trained, they take that many of
    # the group's rows, and the default leaves two replies in a group of four.
    candidates: int = 2
    # The abstract optimises the candidates and the debate replies of the same prompt: a debate group's first
    # `candidates` rows are its candidates, trained as solutions of the bare question, and its other rows reply to
    # the context; each kind is normalised against its own kind in the group. False: the candidates are sampled
    # apart, untrained, and every row of a debate group replies.
    train_candidates: bool = True
    context_size: int = 2  # candidates shown in the context, distinct final answers first
    # One candidate as the context shows it; the context is the prompt followed by each shown candidate.
    candidate_template: str = CANDIDATE_TEMPLATE
    metric: str = "exact_match"  # the built-in outcome reward that tells a right candidate, for the logged figures
    answer_column: str = "answer"

    def __post_init__(self):
        super().__post_init__()
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
