"""Every setting of the HILA plugin: the cost of deferring, how a completion defers on the built-in task, and the
outer loop's supervised phase on the expert's solutions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.supervised import SupervisedSettings
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_TEMPLATE

LEARN_FROM = ("deferred", "deferred_and_failed")


@dataclass
class HilaConfig(OutcomeSettings, SupervisedSettings):
    section: ClassVar[str] = "hila"  # its metric tells a right attempt and a right expert solution
    # The cost-aware reward: a kept attempt scores its correctness (1 or 0); a deferred one scores the expert's
    # correctness minus `cost` (the authors' lambda_defer, 0.3). Between 0 and 1 it orders a right solve above a
    # deferral above a wrong solve.
    cost: float = 0.3
    # The expert's solution of each problem: on the built-in task, the reference solution the rows carry.
    solution_column: str = "solution"
    # The decision prompt: the question and the policy's own attempt ({prompt}, {attempt}); its reply's verdict
    # decides: "correct" keeps the attempt, "wrong" defers to the expert, no verdict keeps the attempt. The default
    # is the built-in task's judge format, which stackrl/arith-skills was taught.
    decision_template: str = JUDGE_TEMPLATE
    # The lengths of the attempt and of the decision; null: the run's max_completion_length.
    max_attempt_tokens: int | None = None
    max_decision_tokens: int | None = None
    # The outer loop: which problems' expert solutions the supervised phase trains on: "deferred" (the paper: the
    # expert is asked only there), or "deferred_and_failed" (also the problems whose kept attempt was wrong).
    learn_from: str = "deferred"
    # every, sft_*: every this many RL steps the policy is fine-tuned on the (question, expert solution) pairs
    # collected since the last phase; RL then resumes with a fresh optimizer and schedule.
    sft_epochs: int = 3

    def check(self):
        if not 0.0 <= self.cost <= 1.0:
            raise ConfigError(f"hila.cost: must lie in [0, 1], between a wrong solve (0) and a right one (1), "
                              f"not {self.cost}")
        if self.learn_from not in LEARN_FROM:
            raise ConfigError(f"hila.learn_from: must be one of {', '.join(LEARN_FROM)}, not {self.learn_from!r}")
        if "{attempt}" not in self.decision_template:
            raise ConfigError("hila.decision_template: must show the policy's attempt as {attempt}")
        for key in ("max_attempt_tokens", "max_decision_tokens"):
            if getattr(self, key) is not None and getattr(self, key) < 1:
                raise ConfigError(f"hila.{key}: must be at least 1, not {getattr(self, key)}")
        self.check_supervised("hila")
