"""AntiSD: the policy's credit moves away from itself shown a verified solution, until the teacher's entropy
collapses; as a bounded per-token advantage beside GRPO's (the paper's form) or as a JSD-ascent loss term."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, generalized_jsd, privileged_student_and_teacher
from stackrl.blocks.tokensignals import CollapseGate, SignalContext, TokenSignals, acted_on_tokens, per_token
from stackrl_antisd.config import AntisdConfig


def bounded_advantage(gap: torch.Tensor) -> torch.Tensor:
    """``-phi(u) = -(softplus(u) - log 2) / 2`` of the gap ``u = log pi_T(y_t) - log pi(y_t)`` of each sampled token.

    A token the teacher expects less than the student (``u < 0``, the deliberation tokens of the paper) gains at
    most ``log(2) / 2`` however far below the gap goes; one it expects more (``u > 0``, tokens the solution
    implies) loses about ``u / 2``. Zero where the gap is zero, so padding and rows without a teacher keep GRPO's.
    """
    return -0.5 * (F.softplus(gap) - math.log(2.0))


def ascent_term(student_logps: torch.Tensor, teacher_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """The loss form: minus the mean generalized JSD over the packed ``(P, V)`` positions, whose descent ascends it.

    Each position contributes at least ``-H(beta)`` (``-log 2`` at ``beta = 0.5``), however far apart the two
    distributions are: the push away from the teacher is bounded.
    """
    return -generalized_jsd(student_logps, teacher_logps, beta).mean()


class Antisd(SelfTeacherPlugin):
    """Anti-self-distillation: a bounded per-token advantage (or a loss term) that moves the policy away from the
    privileged self-teacher, switched off by a gate on the teacher's batch entropy (decided in the advantage stage,
    from the whole batch, before its loss)."""

    Config = AntisdConfig
    # The advantage form (default) counts tokens, the loss form rows; nothing while the gate is closed.
    activity = "completion tokens had their advantage moved away from the teacher (loss form: completions had its context)"

    def __init__(self, config=None):
        super().__init__(config)
        self.gate = CollapseGate(
            self.config.gate_threshold, relative=self.config.gate_relative, latch=self.config.gate_latch,
            smoothing=self.config.gate_smoothing,
        )

    def temperature(self, ctx) -> float:
        return ctx.sampling_temperature if self.config.temperature is None else self.config.temperature

    @property
    def context(self) -> SignalContext:
        return SignalContext(f"{self.name} teacher", self.config.teacher_template)

    def teacher_entropy(self, ctx) -> float | None:
        """The teacher's entropy averaged over every completion token of the batch's rows with its context
        (chunked: never ``N x T x V``); ``None`` when no row has it (none with an answer)."""
        signals = TokenSignals.of(ctx)
        covered = signals.covered(self.context)
        if not covered.any():
            return None
        entropy = signals.entropy(self.context, model=self.config.teacher, temperature=self.temperature(ctx))
        return float((entropy * covered).sum() / covered.sum())

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        # This stage sees the whole batch on every process, so the gate's decision (and its checkpointed state)
        # is the same everywhere.
        entropy = self.teacher_entropy(ctx) if ctx.training and not self.gate.settled else None
        if entropy is not None:  # a batch without a teacher context says nothing of its entropy
            self.gate.update(entropy, ctx.step)
            ctx.log("teacher_entropy", entropy)
            ctx.log("teacher_entropy_smoothed", self.gate.value)
        ctx.log("gate_open", float(self.gate.is_open))
        if self.config.form != "advantage":
            return None
        signals = TokenSignals.of(ctx)
        if not self.gate.is_open:
            ctx.acted(0, of=int(signals.mask.sum()), hint="its entropy gate has closed (antisd.gate_threshold)")
            return None
        gap = signals.gap(self.context, model=self.config.teacher, temperature=self.temperature(ctx))
        bonus = bounded_advantage(gap) * signals.covered(self.context)
        covered = signals.covered(self.context).bool()
        if covered.any():
            ctx.log("bonus_mean", bonus[covered].mean().item())
        reshaped = per_token(advantages, signals.mask) + self.config.scale * bonus
        return acted_on_tokens(ctx, advantages, reshaped, signals.mask)

    @hookimpl
    def loss_term(self, ctx):
        if self.config.form != "loss":
            return None
        if not self.gate.is_open:
            ctx.acted(0, of=len(ctx.rollout), hint="its entropy gate has closed (antisd.gate_threshold)")
            return None
        scored = privileged_student_and_teacher(ctx, self.name, self.config)
        return None if scored is None else ascent_term(scored[1], scored[2], self.config.beta)

    @hookimpl
    def state_dict(self):
        return self.gate.state_dict()

    @hookimpl
    def load_state_dict(self, state):
        self.gate.load_state_dict(state)
