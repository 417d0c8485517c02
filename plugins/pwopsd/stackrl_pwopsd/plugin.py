"""The PW-OPSD loss term: OPSD's clipped forward KL to the privileged self-teacher, weighted up along the completion."""

from __future__ import annotations

import torch

from stackrl import Plugin, Rollout, hookimpl
from stackrl.teacher import check_teacher_run, distilled, forward_kl, position_weights, student_and_teacher
from stackrl_pwopsd.config import PwOpsdConfig, check


def weighted_divergence(scorer, rollout: Rollout, config: PwOpsdConfig, *, grad: bool) -> torch.Tensor:
    """``w(t / T) * clipped KL(teacher || student)`` at every completion token of ``rollout``, packed ``(P,)``.

    ``scorer`` is anything with ``score`` and ``sampling_temperature`` (a hook's ``ctx``); the student keeps its
    gradient when ``grad``.
    """
    student, teacher = student_and_teacher(
        scorer, rollout, config.teacher_template, teacher=config.teacher, temperature=config.temperature, grad=grad,
        top_k=config.top_k, where="pwopsd.teacher_template",
    )
    lengths = [len(ids) for ids in rollout.completion_ids]
    weights = position_weights(lengths, power=config.position_power, floor=config.position_floor)
    return weights.to(student.device) * forward_kl(student, teacher, clip=config.clip)


class PwOpsd(Plugin):
    """Position-weighted on-policy self-distillation: later tokens, whose teacher targets the paper finds more
    reliable, weigh more."""

    Config = PwOpsdConfig
    activity = "completions had the teacher's context to distil on"

    def check_run(self, run):
        check_teacher_run(run, self, "teacher_template")

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)

    @hookimpl
    def loss_term(self, ctx):
        rollout = distilled(ctx, self.config.teacher_template)  # a row without an answer has no teacher
        if rollout is None:
            return None
        # The mean over the micro-batch's tokens, as opsd's: with mean-1 weights per completion, only where in a
        # completion the loss sits changes.
        return weighted_divergence(ctx, rollout, self.config, grad=ctx.training).mean()
