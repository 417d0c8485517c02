"""The SELFCI loss term: the student, on its own completions, distils toward the product of two self-teachers: the
policy shown the feedback on what to share (utility), and shown the feedback on what not to disclose (privacy)."""

from __future__ import annotations

import torch

from stackrl import Rollout, hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, privileged_rows, reverse_kl, score_student, score_teacher
from stackrl_selfci.config import SelfciConfig
from stackrl_selfci.loss import complementary_kl


def teachers_and_student(scorer, rollout: Rollout, config: SelfciConfig, *, teacher: str, grad: bool):
    """The student's, the utility teacher's and the privacy teacher's log-probs at every completion token of
    ``rollout``, packed ``(P, V)`` each; the student keeps its gradient when ``grad``."""
    everywhere = [range(len(ids)) for ids in rollout.completion_ids]
    temperature = scorer.sampling_temperature if config.temperature is None else config.temperature
    common = dict(positions=everywhere, rollout=rollout, full_vocab=True, temperature=temperature)
    utility, privacy = (
        score_teacher(scorer, getattr(config, key), model=teacher, where=f"selfci.{key}", **common).vocab_logprobs
        for key in ("utility_template", "privacy_template")
    )
    student = score_student(scorer, grad=grad, **common).vocab_logprobs
    return student, utility, privacy


def complementary_divergence(scorer, rollout: Rollout, config: SelfciConfig, *, teacher: str, grad: bool):
    """SELFCI's per-token loss at every completion token of ``rollout`` ``(P,)``, and the two KLs' means."""
    student, utility, privacy = teachers_and_student(scorer, rollout, config, teacher=teacher, grad=grad)
    per_token = complementary_kl(student, utility, privacy, utility_weight=config.utility_weight,
                                 privacy_weight=config.privacy_weight)
    with torch.no_grad():
        parts = {"kl_utility": reverse_kl(student, utility).mean().item(),
                 "kl_privacy": reverse_kl(student, privacy).mean().item()}
    return per_token, parts


class Selfci(SelfTeacherPlugin):
    """SELFCI: a loss term of two weighted reverse KLs to two feedback-conditioned self-teachers, whose optimum is
    their product of experts."""

    Config = SelfciConfig
    activity = "completions had both teacher contexts to distil on"
    templates = ("utility_template", "privacy_template")

    @property
    def teacher_model(self) -> str:
        """The name ``score`` knows the teacher by: the initial weights are this plugin's snapshot."""
        return self.name if self.config.teacher == "initial" else self.config.teacher

    @hookimpl
    def train_begin(self, ctx):
        if self.config.teacher == "initial" and ctx.step == 0:
            # taken once, never moved; checkpointed, so that a resumed run gets the starting weights back
            ctx.update_snapshot(self.name, checkpoint=True)

    @hookimpl
    def loss_term(self, ctx):
        rows = privileged_rows(ctx.rollout, self.config.utility_template, self.config.privacy_template)
        ctx.acted(len(rows), of=len(ctx.rollout), hint="no row had both feedback columns (selfci.*_template)")
        if not rows:
            return None
        rollout = ctx.rollout if len(rows) == len(ctx.rollout) else ctx.rollout.select(rows)
        per_token, parts = complementary_divergence(ctx, rollout, self.config, teacher=self.teacher_model,
                                                    grad=ctx.training)
        for name, value in parts.items():
            ctx.log(name, value)
        return per_token.mean()  # the micro-batch's token mean, as opsd's
