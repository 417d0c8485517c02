"""The beta-OPSD loss term: distil the student toward the reference-to-teacher interpolation that beta selects."""

from __future__ import annotations

import torch

from stackrl import Rollout, hookimpl
from stackrl.blocks.teacher import (
    SelfTeacherPlugin, distilled, geometric_interpolation, score_student, student_and_teacher,
)
from stackrl_betaopsd.config import BetaOpsdConfig
from stackrl_betaopsd.loss import trajectory_divergence


def target_divergence(scorer, rollout: Rollout, config: BetaOpsdConfig, *, teacher: str, reference: str,
                      grad: bool) -> torch.Tensor:
    """beta-OPSD's per-token loss at every completion token of ``rollout``, packed ``(P,)``.

    The target at each position is ``softmax((1 - 1/beta) z_ref + z_T / beta)``: ``z_ref`` the reference model's
    logits given the student's own prompt, ``z_T`` the teacher's given the privileged one. ``teacher`` and
    ``reference`` are the models ``scorer.score`` knows them by; the student keeps its gradient when ``grad``.
    """
    student, teacher_logps = student_and_teacher(
        scorer, rollout, config.teacher_template, teacher=teacher, temperature=config.temperature, grad=grad,
        where="betaopsd.teacher_template",
    )
    everywhere = [range(len(ids)) for ids in rollout.completion_ids]
    temperature = scorer.sampling_temperature if config.temperature is None else config.temperature
    reference_logps = score_student(
        scorer, everywhere, rollout=rollout, grad=False, model=reference, full_vocab=True, temperature=temperature
    ).vocab_logprobs
    target = geometric_interpolation(reference_logps, teacher_logps, 1.0 / config.beta)
    tokens = torch.tensor([t for ids in rollout.completion_ids for t in ids], device=student.device)
    return trajectory_divergence(
        student, target, tokens, [len(ids) for ids in rollout.completion_ids],
        divergence=config.divergence, return_to_go=config.return_to_go,
    )


class BetaOpsd(SelfTeacherPlugin):
    """beta-OPSD: OPSD whose target is anchored to the reference policy by beta, with return-to-go credit."""

    Config = BetaOpsdConfig
    activity = "completions had the teacher's context to distil on"

    def model_name(self, which: str) -> str:
        """The name ``score`` knows a configured model by: the initial weights are this plugin's snapshot."""
        return self.name if which == "initial" else which

    @hookimpl
    def train_begin(self, ctx):
        if "initial" in (self.config.reference_model, self.config.teacher):
            ctx.update_snapshot(self.name)  # taken once, never moved

    @hookimpl
    def loss_term(self, ctx):
        rollout = distilled(ctx, self.config.teacher_template)  # a row without an answer has no teacher
        if rollout is None:
            return None
        per_token = target_divergence(
            ctx, rollout, self.config, teacher=self.model_name(self.config.teacher),
            reference=self.model_name(self.config.reference_model), grad=ctx.training,
        )
        return per_token.mean()  # the micro-batch's token mean, as opsd's
