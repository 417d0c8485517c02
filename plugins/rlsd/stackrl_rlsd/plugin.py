"""RLSD: the outcome reward sets each token's direction, the privileged self-teacher its magnitude."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.teacher import check_teacher_run, check_teacher_settings
from stackrl.tokensignals import SignalContext, TokenSignals, magnitude_weights, per_token, reallocate



@dataclass
class RlsdConfig:
    # The teacher's prompt: {prompt} and the dataset columns ({solution}); the default is the built-in task's
    # layout, the worked solution before the question.
    teacher_template: str = REFERENCE_TEMPLATE
    # The teacher's weights: the live policy, or the frozen reference (the LoRA-disabled base).
    teacher: str = "policy"
    # The gap log pi_T - log pi_S is clamped to [-clip, clip] before the exponential: weights in [e^-clip, e^clip].
    clip: float = 2.0
    # Rescale each sequence's weights to mean 1, so it keeps GRPO's total credit (false: the raw exponentials).
    normalize: bool = True
    # Softmax temperature of teacher and student; null: the run's sampling temperature.
    temperature: Optional[float] = None

    def __post_init__(self):
        check_teacher_settings("rlsd", self)
        if self.clip <= 0:
            raise ConfigError(f"rlsd.clip: must be positive, not {self.clip}")


class Rlsd(Plugin):
    """``A_t = A * exp(sign(A) * clip(log pi_T(y_t) - log pi_S(y_t)))``, normalised per sequence."""

    Config = RlsdConfig

    def check_run(self, run):
        check_teacher_run(run, self, "teacher_template")

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        signals = TokenSignals.of(ctx)
        teacher = SignalContext(f"{self.name}.teacher_template", self.config.teacher_template)
        gap = signals.gap(teacher, model=self.config.teacher, temperature=self.config.temperature)
        weights = magnitude_weights(gap, advantages, signals.mask, self.config.clip)
        covered = signals.covered(teacher)  # the rows with the teacher's context (a row without an answer has none)
        if covered.any():
            ctx.log("gap_mean", (gap.sum() / covered.sum()).item())
        if self.config.normalize:
            return reallocate(advantages, weights, signals.mask)
        return per_token(advantages, signals.mask) * weights
