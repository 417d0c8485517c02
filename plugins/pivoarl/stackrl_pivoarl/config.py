"""Every setting of the PivoARL plugin. The authors' code was not found; the defaults are ours, for the built-in
task, and the README's table says where each choice comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.rewards import OutcomeSettings

PIVOTS = ("oracle", "self")
PREFIX_CREDITS = ("retry", "zero", "outcome")


@dataclass
class PivoarlConfig(OutcomeSettings):
    section: ClassVar[str] = "pivoarl"  # its metric tells a failed attempt, and a retry that reaches the answer
    # Who finds the pivotal step of a failed attempt: "oracle", the task's programmatic checker (the first line wrong
    # in itself, stackrl.tasks.first_wrong_line; the built-in task's format only); "self", the policy's structured
    # reflection: a greedy reply in the built-in task's judge format, the step it stops at (stackrl.tasks
    # .judged_wrong_step; the policy must have that skill, as stackrl/arith-skills has).
    pivot: str = "oracle"
    # The share of each group's rows that retry a failed attempt of the group from its pivotal step; the others are
    # first attempts. Where no first attempt failed with a pivot found, the retry rows are fresh attempts instead.
    retry_share: float = 0.5
    # The credit of a retried failure's correct prefix (its lines before the pivot): "retry", the mean advantage of
    # the retries continuing it, floored at 0 (a prefix is rewarded as part of the trajectories that succeed from it,
    # never blamed); "zero", no credit either way (the prefix isolated); "outcome", the failure's own advantage on
    # every token, as plain GRPO (no credit split: the ablation). The pivot and the lines after it always keep the
    # failure's own advantage.
    prefix_credit: str = "retry"
    # With pivot "self": the reflection is sampled (at the run's settings) and trained, packed into the failed
    # attempt's row after the judge marker, its tokens credited by its implicit return, the mean success of the
    # retries from the pivot it found (0 where it found none), against the group's other reflections. false: one
    # greedy reflection, not trained.
    reflection_return: bool = True

    def check(self):
        if self.pivot not in PIVOTS:
            raise ConfigError(f"pivoarl.pivot: must be one of {', '.join(PIVOTS)}, not {self.pivot!r}")
        if not 0 < self.retry_share < 1:
            raise ConfigError(f"pivoarl.retry_share: must be in (0, 1): a group needs first attempts and retries, "
                              f"not {self.retry_share}")
        if self.prefix_credit not in PREFIX_CREDITS:
            raise ConfigError(f"pivoarl.prefix_credit: must be one of {', '.join(PREFIX_CREDITS)}, "
                              f"not {self.prefix_credit!r}")
