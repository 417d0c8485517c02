"""RLRT: on correct rollouts, the tokens the privileged teacher would not have predicted get the most credit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, TeacherSettings
from stackrl.blocks.tokensignals import (
    SignalContext, TokenSignals, acted_on_tokens, magnitude_weights, per_token, reweight, route,
)
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE

INCORRECT = ("grpo", "rlsd")
CREDIT = ("add", "reallocate")


@dataclass
class RlrtConfig(TeacherSettings):
    # `teacher`, the teacher's weights: the live policy, or the frozen reference (the LoRA-disabled base);
    # `temperature`, the softmax temperature of teacher and student.
    section: ClassVar[str] = "rlrt"
    # The teacher's prompt: {prompt} and the dataset columns ({solution}); the default is the built-in task's
    # layout, the worked solution before the question.
    teacher_template: str = REFERENCE_TEMPLATE
    # Correct rollouts: weights exp(-clamp(log pi_T - log pi_S, -clip, clip)), so a token the teacher finds
    # unlikely (a negative gap) weighs up to e^clip.
    clip: float = 2.0
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"credit": CREDIT, "incorrect": INCORRECT}
    # How the weights enter: "add" keeps GRPO's advantage on every token and adds the self-driven tokens' boost
    # (weights floored at 1, never rescaled: GRPO augmented, as the abstract puts it); "reallocate" uses the
    # weights as they are, and with `normalize` rescales each sequence's to mean 1 (the boost then comes out of
    # the rest of the rollout).
    credit: str = "add"
    normalize: bool = True  # credit: reallocate only
    # Incorrect rollouts: "grpo" keeps their advantages; "rlsd" applies RLSD's rule (blame where the teacher
    # disagrees most).
    incorrect: str = "grpo"
    # A token of a correct rollout is counted as self-driven (logged as rlrt/boosted_per_correct_row) when the
    # teacher gives it at least this many nats less than the student.
    self_driven_margin: float = 1.0
    # What counts as a correct rollout.
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0

    def check(self):
        if self.clip <= 0:
            self.refuse("clip", f"must be positive, not {self.clip}")


class Rlrt(SelfTeacherPlugin):
    """Correct rollouts: ``A_t = A * max(1, exp(-clip(log pi_T - log pi_S)))``; incorrect ones: GRPO (or RLSD)."""

    Config = RlrtConfig
    activity = "completion tokens had their advantage reweighted"

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward}

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        signals = TokenSignals.of(ctx)
        teacher = SignalContext(f"{self.name}.teacher_template", self.config.teacher_template)
        gap = signals.gap(teacher, model=self.config.teacher, temperature=self.config.temperature)
        correct = ctx.rollout.passing(
            self.config.correct_reward, self.config.correct_threshold, key=f"{self.name}.correct_reward", step=ctx.step
        )
        # The exponent's sign: reversed (-1) on correct rows; RLSD's sign(A) or none (GRPO) on the others.
        incorrect = advantages.sign() if self.config.incorrect == "rlsd" else torch.zeros_like(advantages)
        reversed_ = -torch.ones_like(signals.mask, dtype=torch.float32)
        direction = route(correct, reversed_, per_token(incorrect, signals.mask))
        weights = magnitude_weights(gap, direction, signals.mask, self.config.clip)
        self_driven = (gap < -self.config.self_driven_margin) & signals.mask.bool() & correct.unsqueeze(1)
        ctx.log("boosted_per_correct_row", self_driven.sum().item() / max(1, int(correct.sum())))
        if self.config.credit == "add":  # no token gets less than GRPO gives it
            reshaped = per_token(advantages, signals.mask) * weights.clamp_min(1.0)
        else:
            reshaped = reweight(advantages, weights, signals.mask, self.config.normalize)
        return acted_on_tokens(ctx, advantages, reshaped, signals.mask)
