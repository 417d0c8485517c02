"""TriPlay-RL's settings: the attacker's topic, the phase schedule, who grades a defender's reply, and each role's
reward values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Dict, Optional

from stackrl import ConfigError
from stackrl.answers import AnswerSettings

from stackrl_triplay.grades import GRADES


class Grader(str, Enum):
    """Who grades a defender's reply in the attacker's and the defender's rewards."""

    evaluator = "evaluator"  # the policy in its evaluator role (the judge format), as in the paper
    verifier = "verifier"  # the task's verifier (the posed question's true answer): an oracle, for comparison


@dataclass
class TriPlayConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify.
    section: ClassVar[str] = "triplay"
    # The attacker's one prompt. None: a pose request listing `topic_examples` of the dataset's problems
    # (stackrl.tasks.posing.request_text), whose reply's first item is the question (stackrl.blocks.selfplay).
    topic: Optional[str] = None
    topic_examples: int = 4
    numbered: bool = True  # the question is the first item of the numbered list the reply continues
    problem_column: str = "question"  # the dataset column of a problem's text; posed questions get it
    # The schedule: the attacker's, the defender's and the evaluator's rows are drawn in turn, each for this many
    # steps (the paper's phases P_Red -> P_Blue -> P_Eval, one role updated at a time).
    phase_steps: int = 1
    # The attacker's reward: each question it poses is answered `defender_samples` times by the defender (the
    # policy), each reply graded; `defender_sampling` overrides the run's sampling for those replies.
    defender_samples: int = 4
    defender_sampling: Dict[str, Any] = field(default_factory=dict)
    grader: Grader = Grader.evaluator
    judge_max_new_tokens: int = 128  # the evaluator's check of one reply (greedy); the built-in one runs ~120 tokens
    # The reward of each grade: the attacker's attack term (averaged over the defender's replies) and the
    # defender's reward. The paper's tiers order them so; their values are not given.
    attack_rewards: Dict[str, float] = field(
        default_factory=lambda: {"unsafe": 1.0, "refusal": 0.5, "useful": 0.0})
    defend_rewards: Dict[str, float] = field(
        default_factory=lambda: {"unsafe": 0.0, "refusal": 0.25, "useful": 1.0})
    semantic_reward: float = 0.5  # R_sem: the attacker's question keeps the task's form
    diversity_weight: float = 0.5  # P_div: this times the highest ROUGE-L to the attack success pool
    # The evaluator's rows: of each defender group, up to this many replies with an answer (wrong and right in
    # turn) become judge prompts, labelled by the verifier.
    evaluator_rows: int = 2

    def __post_init__(self):
        super().__post_init__()
        for key in ("phase_steps", "defender_samples", "judge_max_new_tokens", "topic_examples"):
            if getattr(self, key) < 1:
                raise ConfigError(f"triplay.{key} must be at least 1, not {getattr(self, key)}")
        if self.evaluator_rows < 0:
            raise ConfigError(f"triplay.evaluator_rows must be 0 or more, not {self.evaluator_rows}")
        if self.topic is not None and not self.topic.strip():
            raise ConfigError("triplay.topic is empty: give the attacker's prompt, or null for a pose request")
        names = {g.value for g in GRADES}
        for key in ("attack_rewards", "defend_rewards"):
            values = dict(getattr(self, key))
            if set(values) != names:
                raise ConfigError(f"triplay.{key} must give exactly the grades {sorted(names)}, not {sorted(values)}")
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values.values()):
                raise ConfigError(f"triplay.{key} must be finite numbers, not {values}")
        if not math.isfinite(self.semantic_reward):
            raise ConfigError(f"triplay.semantic_reward must be finite, not {self.semantic_reward}")
        if not (math.isfinite(self.diversity_weight) and self.diversity_weight >= 0):
            raise ConfigError(f"triplay.diversity_weight must be 0 or more, not {self.diversity_weight}")
