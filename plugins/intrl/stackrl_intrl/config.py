"""Every setting of the InT plugin. The authors' pipeline runs once, offline, before RL; the numbers here are ours,
for an online run on the built-in task, and the README's table sets each against the authors' value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.supervised import SupervisedSettings
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_TEMPLATE

PROPOSERS = ("policy", "reference")
REPLY_FORMATS = ("check", "tagged")


@dataclass
class IntrlConfig(OutcomeSettings, SupervisedSettings):
    section: ClassVar[str] = "intrl"  # its metric tells a failed rollout, and a continuation that reaches the answer
    # Who proposes the intervention for a failed rollout: "policy", the policy itself in a prompt built from
    # proposal_template (the paper); "reference", a rule standing for a perfect proposer shown the reference
    # solution: the first step that differs from the solution's, replaced by the solution's step.
    proposer: str = "policy"
    # The policy's prompt: fields {prompt} (the question), {attempt} (the failed rollout) and any column of the
    # rollout ({solution}: the reference solution, as the authors show it). The default is the built-in task's judge
    # format, whose reply stops at the first wrong step and works it out again; the built-in model was taught no
    # judge prompt that shows the reference, and misjudges after one.
    proposal_template: str = JUDGE_TEMPLATE
    # How the policy's reply gives the error and the intervention: "check", a judge reply of the built-in task
    # (stackrl.tasks.redone_step); "tagged", the authors' `<intervention>{"content": ..., "location": N}</intervention>`
    # (the last such block; N is the 1-based step the content goes in place of).
    reply_format: str = "check"
    solution_column: str = "solution"  # the reference solutions, for proposer "reference"
    step_separator: str = "\n"  # between an attempt's steps: a line on the built-in task (the authors: "\n\n")
    # The filter: the policy continues each prefix + intervention this many times, and the intervention is kept when
    # at least one continuation reaches the reference answer (the authors: 32, nonzero pass@32). 0 keeps every
    # intervention read (the authors' step 3 is marked optional).
    continuations: int = 4
    # The lengths of a proposal and of a continuation.
    max_proposal_tokens: int = 128
    max_continuation_tokens: int = 64
    # every, sft_*: every this many RL steps, the policy is fine-tuned on the SFT pairs collected since the last
    # phase (question, prefix up to the error + intervention); RL then resumes with a fresh optimizer and schedule.

    def check(self):
        if self.proposer not in PROPOSERS:
            raise ConfigError(f"intrl.proposer: must be one of {', '.join(PROPOSERS)}, not {self.proposer!r}")
        if self.reply_format not in REPLY_FORMATS:
            raise ConfigError(f"intrl.reply_format: must be one of {', '.join(REPLY_FORMATS)}, not {self.reply_format!r}")
        if "{attempt}" not in self.proposal_template:
            raise ConfigError("intrl.proposal_template: must show the failed rollout as {attempt}")
        if not self.step_separator:
            raise ConfigError("intrl.step_separator: must not be empty")
        for key in ("max_proposal_tokens", "max_continuation_tokens"):
            if getattr(self, key) < 1:
                raise ConfigError(f"intrl.{key}: must be at least 1, not {getattr(self, key)}")
        if self.continuations < 0:
            raise ConfigError(f"intrl.continuations: must be 0 or more, not {self.continuations}")
        self.check_supervised("intrl")
