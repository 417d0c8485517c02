"""The PW-OPSD loss term: OPSD's clipped forward KL to the privileged self-teacher, weighted up along the completion."""

from __future__ import annotations

import torch

from stackrl import hookimpl
from stackrl.blocks.teacher import (
    SelfTeacherPlugin, forward_kl, forward_kl_clip_scale, position_weights, privileged_student_and_teacher,
)
from stackrl_pwopsd.config import PwOpsdConfig


def weighted_divergence(
    lengths: list[int], student: torch.Tensor, teacher: torch.Tensor, config: PwOpsdConfig
) -> torch.Tensor:
    """``w(t / T) * clipped KL(teacher || student)`` at every packed position of completions of ``lengths``,
    ``(P,)``, from the student's and the teacher's packed ``(P, V)`` log-probs."""
    weights = position_weights(lengths, power=config.position_power, floor=config.position_floor)
    return weights.to(student.device) * forward_kl(student, teacher, clip=config.clip)


class PwOpsd(SelfTeacherPlugin):
    """Position-weighted on-policy self-distillation: later tokens, whose teacher targets the paper finds more
    reliable, weigh more."""

    Config = PwOpsdConfig
    activity = "completions had the teacher's context to distil on"

    @hookimpl
    def loss_term(self, ctx):
        scored = privileged_student_and_teacher(ctx, self.name, self.config)
        if scored is None:
            return None
        rollout, student, teacher = scored
        lengths = [len(ids) for ids in rollout.completion_ids]
        per_token = weighted_divergence(lengths, student, teacher, self.config)
        if self.config.clip is not None:
            self.log_clip(ctx, lengths, student, teacher, per_token)
        # The mean over the micro-batch's tokens, as opsd's: with mean-1 weights per completion, only where in a
        # completion the loss sits changes.
        return per_token.mean()

    def log_clip(self, ctx, lengths, student, teacher, per_token) -> None:
        """How much the clip (the project's choice, not the paper's) does: the share of positions it scales down,
        their mean factor, and the clipped loss as a share of what it would be unclipped."""
        scale = forward_kl_clip_scale(student, teacher, self.config.clip)
        active = scale < 1
        ctx.log("clip_active", active.float().mean().item())
        ctx.log("clip_scale", scale[active].mean().item() if active.any() else 1.0)
        with torch.no_grad():
            unclipped = (per_token / scale).sum()
            ctx.log("clip_loss_ratio", (per_token.sum() / unclipped).item() if unclipped > 0 else 1.0)
