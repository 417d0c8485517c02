"""The DASD loss term: each completion token is pulled toward the privileged teacher or pushed away from it, by
its entropy."""

from __future__ import annotations

import torch

from stackrl import Plugin, hookimpl
from stackrl.teacher import check_teacher_run, distilled, generalized_jsd, student_and_teacher
from stackrl.tokensignals import entropy_and_topk_mass
from stackrl_dasd.config import DasdConfig, check


def routed_divergence(
    student_logps: torch.Tensor, teacher_logps: torch.Tensor, pushed: torch.Tensor, config: DasdConfig
) -> torch.Tensor:
    """Per packed position, the pull ``JSD_pull(student, teacher)`` where ``pushed`` is false and the bounded push
    ``-push_weight * JSD_push(student, teacher)`` where it is true; the loss is their mean."""
    pull = generalized_jsd(student_logps, teacher_logps, config.pull_beta)
    push = generalized_jsd(student_logps, teacher_logps, config.push_beta)
    return torch.where(pushed, -config.push_weight * push, pull)


def pushed_tokens(entropy: torch.Tensor, config: DasdConfig) -> tuple[torch.Tensor, float]:
    """Which positions are pushed (entropy above the threshold), and the threshold in nats."""
    if config.threshold_kind == "fixed":
        threshold = config.threshold
    else:
        threshold = torch.quantile(entropy.double(), config.threshold).item()
    return entropy > threshold, threshold


class Dasd(Plugin):
    """Direction-adaptive self-distillation: a loss term that descends the divergence to the privileged teacher on
    low-entropy tokens and ascends a bounded one on high-entropy tokens."""

    Config = DasdConfig
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
        student, teacher = student_and_teacher(
            ctx, rollout, self.config.teacher_template, teacher=self.config.teacher,
            temperature=self.config.temperature, grad=ctx.training, where=f"{self.name}.teacher_template",
        )
        # The route is a decision, not something to train: the entropy carries no gradient. Computed a chunk of
        # positions at a time from the rows already held, so it adds chunk x V, not another P x V.
        routing = (student if self.config.entropy_of == "student" else teacher).detach()
        entropy, _ = entropy_and_topk_mass(routing, 1)
        pushed, threshold = pushed_tokens(entropy, self.config)
        ctx.log("pushed_share", pushed.float().mean().item())
        ctx.log("entropy_threshold", threshold)
        return routed_divergence(student, teacher, pushed, self.config).mean()
