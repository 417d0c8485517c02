"""SDAR's auxiliary term: the teacher's log-ratio on each sampled token, gated by a sigmoid of itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, TeacherSettings
from stackrl.blocks.tokensignals import SignalContext, TokenSignals, sigmoid_gate
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE


@dataclass
class SdarGateConfig(TeacherSettings):
    """``teacher``: the live policy (the authors') or the frozen reference, shown ``teacher_template`` ({prompt}
    and the dataset columns; the authors' privileged context is retrieved skills, the built-in task's the worked
    solution before the question); ``temperature``: null is the run's sampling temperature. ``sharpness`` sets the
    gate ``sigmoid(sharpness * gap_t)`` (the authors' gate_beta, 5.0); ``coef`` the term's weight next to GRPO's
    loss (the authors' sdar_coef, 0.01; the host's losses.sdargate multiplies it)."""

    section: ClassVar[str] = "sdargate"
    teacher_template: str = REFERENCE_TEMPLATE
    sharpness: float = 5.0
    coef: float = 0.01

    def check(self):
        if self.sharpness < 0:
            self.refuse("sharpness", f"must be non-negative (0: every gate 1/2), not {self.sharpness}")
        if self.coef < 0:
            self.refuse("coef", f"must be non-negative, not {self.coef}")


def gated_distillation(student_logps: torch.Tensor, teacher_logps: torch.Tensor, mask: torch.Tensor,
                       sharpness: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, gate)``: the token mean over ``mask`` of ``g_t * (log pi_T(y_t) - log pi_S(y_t))`` and the gate
    ``g_t = sigmoid(sharpness * gap_t)``, computed on detached values. Only the student's log-probs carry a
    gradient, ``-g_t * d log pi_S(y_t)``: every sampled token is raised, most where the teacher endorses it."""
    gap = (teacher_logps.detach() - student_logps.detach()) * mask
    gate = sigmoid_gate(gap, mask, sharpness)
    per_token = gate * (teacher_logps.detach() - student_logps) * mask
    return per_token.sum() / mask.sum().clamp_min(1), gate


class SdarGate(SelfTeacherPlugin):
    """SDAR: GRPO stays the objective; ``coef * mean_t sigmoid(sharpness * gap_t) * gap_t`` is added to it."""

    Config = SdarGateConfig
    activity = "completion tokens were distilled (the teacher's context; gate > 1/2 logged apart)"

    @hookimpl
    def loss_term(self, ctx):
        signals = TokenSignals.of(ctx)
        teacher = SignalContext(f"{self.name}.teacher_template", self.config.teacher_template)
        covered = signals.covered(teacher) * ctx.loss_mask[:, : signals.mask.size(1)]
        ctx.acted(int(covered.sum()), of=int(signals.mask.sum()),
                  hint="no row had the teacher's context (a row without an answer has none)")
        if not covered.any():
            return None
        teacher_logps = signals.logprobs(teacher, model=self.config.teacher, temperature=self.config.temperature)
        student_logps = self.student_logps(ctx, signals)
        loss, gate = gated_distillation(student_logps, teacher_logps, covered, self.config.sharpness)
        ctx.log("gate_mean", ((gate * covered).sum() / covered.sum()).item())
        ctx.log("gate_active", (((gate > 0.5) * covered).sum() / covered.sum()).item())
        return self.config.coef * loss

    def student_logps(self, ctx, signals: TokenSignals) -> torch.Tensor:
        """The student's log-probs of the sampled tokens with gradient: the loss's own forward at the sampling
        temperature, or a forward of its own at the configured one."""
        width = signals.mask.size(1)
        if self.config.temperature is None or self.config.temperature == ctx.sampling_temperature:
            return ctx.policy_logps[:, :width]
        rollout = ctx.rollout
        scores = ctx.score(rollout.prompt_ids, rollout.completion_ids, grad=True,
                           temperature=self.config.temperature)
        return scores.logprobs[:, :width]
