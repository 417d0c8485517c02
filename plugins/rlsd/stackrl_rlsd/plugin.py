"""RLSD: the outcome reward sets each token's direction, the privileged self-teacher its magnitude."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, TeacherSettings
from stackrl.blocks.tokensignals import (
    SignalContext, TokenSignals, acted_on_tokens, bounded_weights, linear_decay, magnitude_weights, mixed, reweight,
)
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE

FORMS = ("exponential", "bounded")


@dataclass
class RlsdConfig(TeacherSettings):
    # `teacher`, the teacher's weights: the live policy, or the frozen reference (the LoRA-disabled base);
    # `temperature`, the softmax temperature of teacher and student.
    section: ClassVar[str] = "rlsd"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"form": FORMS}
    # The teacher's prompt: {prompt} and the dataset columns ({solution}); the default is the built-in task's
    # layout, the worked solution before the question.
    teacher_template: str = REFERENCE_TEMPLATE
    # "exponential": w = exp(sign(A) * clamp(gap, -clip, clip)), weights in [e^-clip, e^clip]. "bounded" (the RLSD
    # baseline in the RLCSD authors' code): w = clamp(exp(sign(A) * gap), 1 - bound, 1 + bound), applied at `mix`
    # of its strength, (1 - mix) + mix * w, the mix falling linearly to 0 over `mix_decay_steps` steps.
    form: str = "exponential"
    clip: float = 2.0
    bound: float = 0.2
    mix: float = 0.5
    mix_decay_steps: int = 50
    # Rescale each sequence's weights to mean 1, so it keeps GRPO's total credit (false: the weights as they are).
    normalize: bool = True

    def check(self):
        if self.clip <= 0:
            self.refuse("clip", f"must be positive, not {self.clip}")
        if not 0 < self.bound < 1:
            self.refuse("bound", f"must be in (0, 1), not {self.bound}")
        if not 0 <= self.mix <= 1:
            self.refuse("mix", f"must be in [0, 1], not {self.mix}")
        if self.mix_decay_steps < 0:
            self.refuse("mix_decay_steps", f"must be non-negative, not {self.mix_decay_steps}")


class Rlsd(SelfTeacherPlugin):
    """``A_t = A * w_t``, ``w_t`` from ``sign(A) * (log pi_T(y_t) - log pi_S(y_t))``, normalised per sequence."""

    Config = RlsdConfig
    activity = "completion tokens had their advantage reweighted"

    def weights(self, gap, advantages, mask, step: int):
        """Each token's weight under the configured form, before any normalisation."""
        config = self.config
        if config.form == "exponential":
            return magnitude_weights(gap, advantages, mask, config.clip)
        share = linear_decay(config.mix, config.mix_decay_steps, step)
        return mixed(bounded_weights(gap, advantages, mask, config.bound), share, mask)

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        signals = TokenSignals.of(ctx)
        teacher = SignalContext(f"{self.name}.teacher_template", self.config.teacher_template)
        gap = signals.gap(teacher, model=self.config.teacher, temperature=self.config.temperature)
        covered = signals.covered(teacher)  # the rows with the teacher's context (a row without an answer has none)
        if covered.any():
            ctx.log("gap_mean", (gap.sum() / covered.sum()).item())
        weights = self.weights(gap, advantages, signals.mask, ctx.step)
        reshaped = reweight(advantages, weights, signals.mask, self.config.normalize)
        return acted_on_tokens(ctx, advantages, reshaped, signals.mask)
