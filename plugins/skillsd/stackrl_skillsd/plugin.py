"""Skill-SD ("Skill-SD: Skill-Conditioned Self-Distillation for Multi-turn LLM Agents", arXiv 2604.10674): the
policy's successful trajectories become skills that only a synced teacher reads; the student, on the plain prompt,
learns from it through an importance-weighted reverse KL on its own sampled tokens, alongside GRPO."""

from __future__ import annotations

import torch

from stackrl import hookimpl
from stackrl.blocks.experience import ExperienceLibrary
from stackrl.blocks.teacher import SelfTeacherPlugin, privileged_rows, score_teacher
from stackrl.errors import ConfigError
from stackrl_skillsd.config import SKILL, SkillsdConfig
from stackrl_skillsd.loss import importance_weighted_reverse_kl
from stackrl_skillsd.skills import first_successes, remember, retrieve, summary_requests


class Skillsd(SelfTeacherPlugin):
    """Skill-conditioned self-distillation.

    After each step the first success of each group becomes a skill in the library (its completion, or the
    policy's summary of it). In the advantage stage every row gets the skill of the stored success whose prompt is
    most like its own, as the column ``skill``, which only the teacher's prompt names. The loss term is the
    importance-weighted reverse KL from the student to the teacher on the rows that have a skill. The teacher is a
    copy of the policy re-synced every ``sync_every`` steps. The library is plugin state, checkpointed.
    """

    Config = SkillsdConfig
    activity = "completions were distilled on (a stored skill of a similar prompt conditioned their teacher)"

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, self.name)

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward}

    def check_run(self, run):
        if run.columns is not None and SKILL in run.columns:
            raise ConfigError(f"{self.name}.teacher_template: the data has a column '{SKILL}', the name of the "
                              "column skillsd adds; rename the data's column")
        super().check_run(run)

    @property
    def teacher_model(self) -> str:
        """The name ``ctx.score`` knows the teacher by: the synced copy is this plugin's own snapshot."""
        return self.name if self.config.teacher == "synced" else self.config.teacher

    def _sync(self, ctx, step: int) -> None:
        if self.config.teacher == "synced" and step % self.config.sync_every == 0:
            ctx.update_snapshot(self.name)
            ctx.log("synced", 1.0)

    @hookimpl
    def train_begin(self, ctx):
        self._sync(ctx, 0)

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        rollout = ctx.rollout
        rollout.columns[SKILL] = retrieve(self.library, rollout, self.config.min_similarity)
        ctx.log("skilled_rows", sum(s is not None for s in rollout.columns[SKILL]) / max(1, len(rollout)))
        return None

    @hookimpl
    def loss_term(self, ctx):
        rollout = ctx.rollout
        rows = privileged_rows(rollout, self.config.teacher_template) if SKILL in rollout.columns else []
        ctx.acted(len(rows), of=len(rollout),
                  hint="no prompt of the batch had a stored success yet (skillsd.correct_reward)")
        if not rows:
            return None
        sub = rollout if len(rows) == len(rollout) else rollout.select(rows)
        temperature = ctx.sampling_temperature if self.config.temperature is None else self.config.temperature
        with torch.no_grad():
            teacher = score_teacher(ctx, self.config.teacher_template, model=self.teacher_model, rollout=sub,
                                    temperature=temperature, where=f"{self.name}.teacher_template")
        index = torch.tensor(rows, device=ctx.policy_logps.device)
        student = ctx.policy_logps.index_select(0, index)
        width = student.size(1)
        teacher_logps = _fit(teacher.logprobs.to(student.device), width)
        mask = ctx.loss_mask.index_select(0, index).to(student.device) * _fit(teacher.mask.to(student.device), width)
        behaviour = _behaviour(sub, student)
        return importance_weighted_reverse_kl(student, teacher_logps, mask, behaviour_logps=behaviour,
                                              truncation=self.config.truncation)

    @hookimpl
    def post_step(self, ctx):
        self._sync(ctx, ctx.step)
        if ctx.rollout is None:
            return
        rollout = ctx.rollout
        passed = rollout.passing(self.config.correct_reward, self.config.correct_threshold,
                                 key=f"{self.name}.correct_reward", step=ctx.step).tolist()
        rows = first_successes(rollout, passed)
        if self.config.skill_form == "summary" and rows:
            requests = summary_requests(rollout, rows, self.config.summary_template, f"{self.name}.summary_template")
            written = ctx.generate(requests, caller=self.name, do_sample=False,
                                   max_new_tokens=self.config.summary_tokens)
            skills = [g.text.strip() or rollout.completions[r] for g, r in zip(written, rows)]
        else:
            skills = [rollout.completions[r] for r in rows]
        remember(self.library, rollout, rows, skills, ctx.step)
        ctx.log("library_size", len(self.library))

    @hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict()}

    @hookimpl
    def load_state_dict(self, state):
        self.library = ExperienceLibrary(self.config.experience, self.name)
        self.library.load_state_dict(state["library"])


def _fit(values: torch.Tensor, width: int) -> torch.Tensor:
    """``(B, T')`` right-padded with zeros (or cut) to the micro-batch's width ``T``."""
    return torch.nn.functional.pad(values, (0, max(0, width - values.size(1))))[:, :width]


def _behaviour(rollout, student: torch.Tensor) -> torch.Tensor | None:
    """The log-probs of the policy that sampled each row: ``Samples.behaviour_logprobs`` for a row another policy
    wrote, the student's own (detached) for a fresh one; ``None`` when every row is fresh."""
    stored = rollout.behaviour_logprobs
    if stored is None or all(row is None for row in stored):
        return None
    behaviour = student.detach().clone()
    for i, row in enumerate(stored):
        if row is not None:
            n = min(len(row), behaviour.size(1))
            behaviour[i, :n] = torch.tensor(row[:n], dtype=behaviour.dtype, device=behaviour.device)
    return behaviour
