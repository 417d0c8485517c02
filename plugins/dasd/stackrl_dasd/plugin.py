"""DASD: each completion token is pulled toward the privileged teacher or pushed away from it, by its entropy; as a
routed correction to GRPO's token advantages (the paper's form) or as a routed divergence loss term."""

from __future__ import annotations

import torch

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, generalized_jsd, privileged_student_and_teacher
from stackrl.blocks.tokensignals import STUDENT, SignalContext, TokenSignals, acted_on_tokens, entropy_and_topk_mass, per_token
from stackrl_dasd.config import DasdConfig


def pushed_tokens(entropy: torch.Tensor, config: DasdConfig) -> tuple[torch.Tensor, float]:
    """Which positions are pushed (entropy above the threshold), and the threshold in nats."""
    if config.threshold_kind == "fixed":
        threshold = config.threshold
    else:
        threshold = torch.quantile(entropy.double(), config.threshold).item()
    return entropy > threshold, threshold


def directional_credit(gap: torch.Tensor, entropy: torch.Tensor, mask: torch.Tensor, config: DasdConfig):
    """``omega_t * delta_t`` at every token, ``(N, T)``, zero where ``mask`` is; with the mean threshold in nats.

    Per completion: ``delta_t = gap_t / mean |gap|``, the teacher-student log-evidence gap of the sampled token in
    units of its typical size; ``omega_t = tanh((tau - H_t) / s_H) * sigmoid(|delta_t| - 1)``, ``tau`` the
    completion's entropy threshold (:func:`pushed_tokens`) and ``s_H`` the mean absolute deviation of its
    entropies. Below the threshold omega is positive: a token the teacher expects more than the student gains
    credit (pulled toward the teacher); above it the sign turns (pushed away); the sigmoid quiets small gaps.
    """
    credit = torch.zeros_like(gap)
    thresholds = []
    for row in range(gap.size(0)):
        real = mask[row].bool()
        typical = gap[row, real].abs().mean() if real.any() else gap.new_zeros(())
        if typical == 0:  # no teacher on this row (no answer), or a teacher that agrees everywhere
            continue
        delta, h = gap[row, real] / typical, entropy[row, real]
        _, tau = pushed_tokens(h, config)
        spread = (h - h.mean()).abs().mean().clamp_min(torch.finfo(h.dtype).tiny)
        credit[row, real] = torch.tanh((tau - h) / spread) * torch.sigmoid(delta.abs() - 1) * delta
        thresholds.append(tau)
    return credit, (sum(thresholds) / len(thresholds) if thresholds else None)


def routed_divergence(
    student_logps: torch.Tensor, teacher_logps: torch.Tensor, pushed: torch.Tensor, config: DasdConfig
) -> torch.Tensor:
    """The loss form, per packed position: the pull ``JSD_pull(student, teacher)`` where ``pushed`` is false and the
    bounded push ``-push_weight * JSD_push(student, teacher)`` where it is true; the loss is their mean."""
    pull = generalized_jsd(student_logps, teacher_logps, config.pull_beta)
    push = generalized_jsd(student_logps, teacher_logps, config.push_beta)
    return torch.where(pushed, -config.push_weight * push, pull)


class Dasd(SelfTeacherPlugin):
    """Direction-adaptive self-distillation: low-entropy tokens are moved toward the privileged teacher, high-entropy
    tokens away from it."""

    Config = DasdConfig
    # The advantage form (default) counts tokens, the loss form rows.
    activity = "completion tokens had their advantage moved by the teacher's gap (loss form: completions had its context)"

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        if self.config.form != "advantage":
            return None
        signals = TokenSignals.of(ctx)
        teacher = SignalContext(f"{self.name}.teacher_template", self.config.teacher_template)
        options = dict(temperature=self.config.temperature)
        # The route is read first: entropy needs the whole distribution, and the gap then reuses its log-probs.
        if self.config.entropy_of == "student":
            entropy = signals.entropy(STUDENT, **options)
        else:
            entropy = signals.entropy(teacher, model=self.config.teacher, **options)
        gap = signals.gap(teacher, model=self.config.teacher, **options)
        covered = signals.covered(teacher)  # a row without an answer has no teacher, and keeps GRPO's advantage
        credit, threshold = directional_credit(gap, entropy, covered, self.config)
        if covered.any():
            real = covered.bool()
            ctx.log("pushed_share", (credit[real] * gap[real] < 0).float().mean().item())
            ctx.log("correction_mean_abs", self.config.scale * credit[real].abs().mean().item())
        if threshold is not None:
            ctx.log("entropy_threshold", threshold)
        reshaped = per_token(advantages, signals.mask) + self.config.scale * credit
        return acted_on_tokens(ctx, advantages, reshaped, signals.mask)

    @hookimpl
    def loss_term(self, ctx):
        scored = privileged_student_and_teacher(ctx, self.name, self.config) if self.config.form == "loss" else None
        if scored is None:
            return None
        _, student, teacher = scored
        # The route is a decision, not something to train: the entropy carries no gradient. Computed a chunk of
        # positions at a time from the rows already held, so it adds chunk x V, not another P x V.
        routing = (student if self.config.entropy_of == "student" else teacher).detach()
        entropy, _ = entropy_and_topk_mass(routing, 1)
        pushed, threshold = pushed_tokens(entropy, self.config)
        ctx.log("pushed_share", pushed.float().mean().item())
        ctx.log("entropy_threshold", threshold)
        return routed_divergence(student, teacher, pushed, self.config).mean()
