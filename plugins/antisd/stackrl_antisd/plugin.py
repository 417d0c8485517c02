"""The AntiSD loss term: the policy ascends its bounded divergence from itself shown a verified solution, until
the teacher's entropy collapses."""

from __future__ import annotations

import torch

from stackrl import Plugin, hookimpl
from stackrl.teacher import check_teacher_run, distilled, generalized_jsd, student_and_teacher
from stackrl.tokensignals import CollapseGate, SignalContext, TokenSignals
from stackrl_antisd.config import AntisdConfig, check


def ascent_term(student_logps: torch.Tensor, teacher_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """The loss whose descent ascends the generalized JSD: minus its mean over the packed ``(P, V)`` positions.

    Each position contributes at least ``-H(beta)`` (``-log 2`` at ``beta = 0.5``), however far apart the two
    distributions are: the push away from the teacher is bounded.
    """
    return -generalized_jsd(student_logps, teacher_logps, beta).mean()


class Antisd(Plugin):
    """Anti-self-distillation: a loss term that ascends the JSD to the privileged self-teacher, switched off by a
    gate on the teacher's batch entropy (decided in the advantage stage, from the whole batch, before its loss)."""

    Config = AntisdConfig
    activity = "completions had the teacher's context to move away from, while the gate was open"

    def check_run(self, run):
        check_teacher_run(run, self, "teacher_template")

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)
        self.gate = CollapseGate(
            self.config.gate_threshold, relative=self.config.gate_relative, latch=self.config.gate_latch,
            smoothing=self.config.gate_smoothing,
        )

    def temperature(self, ctx) -> float:
        return ctx.sampling_temperature if self.config.temperature is None else self.config.temperature

    def teacher_entropy(self, ctx) -> float | None:
        """The teacher's entropy averaged over every completion token of the batch's rows with its context
        (chunked: never ``N x T x V``); ``None`` when no row has it (none with an answer)."""
        signals = TokenSignals.of(ctx)
        context = SignalContext(f"{self.name} teacher", self.config.teacher_template)
        covered = signals.covered(context)
        if not covered.any():
            return None
        entropy = signals.entropy(context, model=self.config.teacher, temperature=self.temperature(ctx))
        return float((entropy * covered).sum() / covered.sum())

    @hookimpl
    def reshape_advantages(self, ctx):
        # The advantages are left as they are: this stage sees the whole batch on every process, so the gate's
        # decision (and its checkpointed state) is the same everywhere.
        entropy = self.teacher_entropy(ctx) if ctx.training and not self.gate.settled else None
        if entropy is not None:  # a batch without a teacher context says nothing of its entropy
            self.gate.update(entropy, ctx.step)
            ctx.log("teacher_entropy", entropy)
            ctx.log("teacher_entropy_smoothed", self.gate.value)
        ctx.log("gate_open", float(self.gate.is_open))
        return None

    @hookimpl
    def loss_term(self, ctx):
        if not self.gate.is_open:
            ctx.acted(0, of=len(ctx.rollout), hint="its entropy gate has closed (antisd.gate_threshold)")
            return None
        rollout = distilled(ctx, self.config.teacher_template)  # a row without an answer has no teacher
        if rollout is None:
            return None
        student, teacher = student_and_teacher(
            ctx, rollout, self.config.teacher_template, teacher=self.config.teacher,
            temperature=self.temperature(ctx), grad=ctx.training, where=f"{self.name}.teacher_template",
        )
        return ascent_term(student, teacher, self.config.beta)

    @hookimpl
    def state_dict(self):
        return self.gate.state_dict()

    @hookimpl
    def load_state_dict(self, state):
        self.gate.load_state_dict(state)
