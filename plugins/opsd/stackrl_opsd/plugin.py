"""The OPSD loss term: the policy, shown a reference solution, teaches itself on the completions it just sampled."""

from __future__ import annotations

import torch

from stackrl import Rollout, hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, generalized_jsd, privileged_rows, student_and_teacher
from stackrl_opsd.config import OpsdConfig


def distillation_divergence(scorer, rollout: Rollout, config: OpsdConfig, *, teacher: str, grad: bool) -> torch.Tensor:
    """The generalized JSD between student and teacher at every completion token of ``rollout``, shape ``(P,)``.

    ``scorer`` is anything with ``score`` and ``sampling_temperature`` (a hook's ``ctx``); ``teacher`` the model
    name to score it with. The student's distribution keeps its gradient when ``grad``.
    """
    student, teacher_logps = student_and_teacher(
        scorer, rollout, config.teacher_template, teacher=teacher, temperature=config.temperature, grad=grad,
        top_k=config.top_k, where="opsd.teacher_template",
    )
    return generalized_jsd(student, teacher_logps, config.beta)


class Opsd(SelfTeacherPlugin):
    """On-policy self-distillation: a generalized-JSD loss term to the privileged self-teacher on every token."""

    Config = OpsdConfig
    activity = "completions were distilled on (the teacher's context; with correct_only, correct ones)"

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward} if self.config.correct_only else {}

    @property
    def teacher_model(self) -> str:
        """The name ``score`` knows the teacher by: the EMA is this plugin's own snapshot."""
        return self.name if self.config.teacher == "ema" else self.config.teacher

    def rows_to_distill(self, rollout: Rollout, step: int) -> list[int]:
        """Every row with the teacher's context (a row without an answer has none), or with ``correct_only``
        those of them the outcome reward scores as correct."""
        rows = privileged_rows(rollout, self.config.teacher_template)
        if not self.config.correct_only:
            return rows
        correct = rollout.passing(
            self.config.correct_reward, self.config.correct_threshold, key="opsd.correct_reward", step=step
        )
        return [i for i in rows if correct[i]]

    @hookimpl
    def train_begin(self, ctx):
        if self.config.teacher == "ema":
            ctx.update_snapshot(self.name)

    @hookimpl
    def post_step(self, ctx):
        if self.config.teacher == "ema":
            ctx.update_snapshot(self.name, decay=self.config.ema_decay)

    @hookimpl
    def loss_term(self, ctx):
        rows = self.rows_to_distill(ctx.rollout, ctx.step)
        ctx.acted(len(rows), of=len(ctx.rollout), hint="no row had the teacher's context" + (
            ", or none passed opsd.correct_reward (opsd.correct_only)" if self.config.correct_only else ""))
        ctx.log("distilled_rows", len(rows) / max(1, len(ctx.rollout)))
        if not rows:
            return None
        divergence = distillation_divergence(
            ctx, ctx.rollout.select(rows), self.config, teacher=self.teacher_model, grad=ctx.training
        )
        # TRL's GKD "batchmean": the mean over the micro-batch's distilled tokens.
        return divergence.mean()
