"""The π-Distill plugin: the rollout is the teacher's, GRPO trains the teacher, a loss term trains the student."""

from __future__ import annotations

import torch

from stackrl import Rollout, hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, teacher_prompts
from stackrl.plugin import template_fields
from stackrl_pidistill.config import PiDistillConfig
from stackrl_pidistill.objective import joint_loss, student_and_teacher_terms


def informed_rows(columns: dict[str, list], template: str, count: int) -> list[int]:
    """The rows with a value for every column ``template`` uses: those the teacher sees the privileged
    information of. The others have no teacher distinct from the student and stay plain GRPO."""
    used = [name for name in template_fields(template) if name in columns]
    return [i for i in range(count) if all(columns[name][i] is not None for name in used)]


class PiDistill(SelfTeacherPlugin):
    """π-Distill: ``alpha * J_teacher + (1 - alpha) * J_student`` on rollouts sampled from the policy shown the
    privileged information; the student is the same weights without it."""

    Config = PiDistillConfig
    activity = "completions sampled from the teacher were distilled into the student"

    @property
    def advantages_column(self) -> str:
        """The column holding each row's advantages as they reached this plugin, before the teacher's scaling."""
        return f"{self.name}.advantages"

    @hookimpl
    def transform_prompts(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures the student, which never sees the information
            return None
        rows = informed_rows(ctx.rollout_columns, self.config.teacher_template, len(prompts))
        columns = {name: [values[i] for i in rows] for name, values in ctx.rollout_columns.items()}
        shown = teacher_prompts([prompts[i] for i in rows], columns, self.config.teacher_template,
                                where=f"{self.name}.teacher_template")
        out = list(prompts)
        for i, prompt in zip(rows, shown):
            out[i] = prompt
        ctx.log("informed_rows", len(rows) / max(1, len(prompts)))
        return out

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        if not ctx.training:
            return None
        rollout = ctx.rollout
        ctx.rollout.columns[self.advantages_column] = [a.clone() for a in advantages]
        scale = torch.ones(len(rollout))
        scale[informed_rows(rollout.columns, self.config.teacher_template, len(rollout))] = self.config.alpha
        return advantages * (scale if advantages.dim() == 1 else scale.unsqueeze(1))

    @hookimpl
    def loss_term(self, ctx):
        if not ctx.training:
            return None
        rows = informed_rows(ctx.rollout.columns, self.config.teacher_template, len(ctx.rollout))
        ctx.acted(len(rows), of=len(ctx.rollout), hint=(
            f"no row had a value for every column {self.name}.teacher_template uses"))
        if not rows:
            return None
        rollout = ctx.rollout.select(rows)
        terms = self.terms(ctx, rollout)
        kl = terms.get("student_kl")
        if kl is not None:
            ctx.log("teacher_student_kl", kl.mean().item())
        ctx.log("student_pg", terms["student_pg"].mean().item())
        return joint_loss(terms, self.config.alpha, self.config.beta)

    def terms(self, ctx, rollout: Rollout) -> dict[str, torch.Tensor]:
        """The objective's per-token terms on ``rollout`` (rows the teacher informed): the student scored on the
        dataset's prompts with gradient, the teacher on the prompts the rows were sampled and trained on."""
        config = self.config
        temperature = ctx.sampling_temperature if config.temperature is None else config.temperature
        kl = config.beta > 0
        common = dict(positions=[range(len(ids)) for ids in rollout.completion_ids], full_vocab=kl,
                      temperature=temperature)
        student = ctx.score(rollout.prompts, rollout.completion_ids, grad=True, **common)
        teacher = ctx.score(rollout.prompt_ids, rollout.completion_ids, grad=kl and config.alpha > 0, **common)
        packed = student.mask.bool()
        advantages = torch.cat([
            a.expand(len(ids)) if a.dim() == 0 else a[: len(ids)]
            for a, ids in zip(rollout.columns[self.advantages_column], rollout.completion_ids)
        ]).to(student.logprobs.device)
        return student_and_teacher_terms(
            student.logprobs[packed], teacher.logprobs[teacher.mask.bool()], advantages,
            clip_low=config.clip_low, clip_high=config.clip_high,
            student_vocab=student.vocab_logprobs, teacher_vocab=teacher.vocab_logprobs,
        )
