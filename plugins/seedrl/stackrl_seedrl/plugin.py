"""SEED: the shift in the sampled tokens' probability that a hindsight skill induces, added to GRPO's advantage."""

from __future__ import annotations

import torch

from stackrl import hookimpl
from stackrl.blocks.experience import ExperienceLibrary
from stackrl.blocks.teacher import SelfTeacherPlugin
from stackrl.blocks.tokensignals import TokenSignals, per_token
from stackrl.errors import ConfigError
from stackrl_seedrl.config import SKILL, SeedrlConfig
from stackrl_seedrl.skills import keep_verified, retrieved_skills, skill_shift, written_skills


def skill_advantages(advantages: torch.Tensor, shift: torch.Tensor, mask: torch.Tensor, weight: float,
                     clip: float | None = None) -> torch.Tensor:
    """``A_t + weight * clip(shift_t)`` on every completion token, ``(N, T)``: GRPO's advantage (``(N,)`` or
    ``(N, T)``) with the skill's log-probability shift added as a dense token-level term (the authors' fused
    advantage, ``A_ep + w_ep * Delta_ep``)."""
    if clip is not None:
        shift = shift.clamp(-clip, clip)
    return per_token(advantages, mask) + weight * shift * mask


class Seedrl(SelfTeacherPlugin):
    """Self-evolving on-policy distillation: each rollout row gets a hindsight skill (written by the policy from
    the row's completed trajectory, or retrieved from the library of earlier verified completions); the sampled
    tokens are re-scored with the skill before the prompt and without it, and ``weight`` times the difference of
    log-probabilities is added to GRPO's advantage at each token. The library is plugin state, checkpointed; the
    trained policy needs no skill at inference."""

    Config = SeedrlConfig
    activity = "completions were re-scored under a hindsight skill"
    templates = ("teacher_template", "analysis_template")

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, self.name or "seedrl")

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward}

    def check_run(self, run):
        if run.columns is not None and SKILL in run.columns:
            raise ConfigError(f"{self.name}.teacher_template: the data has a column '{SKILL}', the name of the "
                              "column seedrl adds; rename the data's column")
        super().check_run(run)

    def passed(self, rollout, step: int) -> list[bool]:
        return rollout.passing(self.config.correct_reward, self.config.correct_threshold,
                               key=f"{self.name}.correct_reward", step=step).tolist()

    def skills(self, ctx, passed: list[bool]) -> list[str | None]:
        """Each row's skill (``None``: none), ``failed_only`` applied."""
        rollout, config = ctx.rollout, self.config
        wanted = [i for i in range(len(rollout)) if not (config.failed_only and passed[i])]
        if config.skills == "policy":
            return written_skills(ctx, self.library, rollout, wanted, passed, config.analysis_template,
                                  config.skill_tokens)
        found = retrieved_skills(self.library, rollout, config.retrieve)
        return [found[i] if i in wanted else None for i in range(len(rollout))]

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        if not ctx.training:
            return None
        rollout, config = ctx.rollout, self.config
        rollout.columns[SKILL] = self.skills(ctx, self.passed(rollout, ctx.step))
        shift, covered = skill_shift(ctx, config.teacher_template, teacher=config.teacher,
                                     temperature=config.temperature)
        rows = int((covered.sum(1) > 0).sum())
        ctx.acted(rows, of=len(rollout), hint=(
            "no row had a skill: the library holds no verified completion of these prompts yet (seedrl.skills: "
            "library, seedrl.retrieve)" if config.skills == "library" else "no skill was written (seedrl.failed_only?)"))
        ctx.log("skill_rows", rows / max(1, len(rollout)))
        ctx.log("library_size", len(self.library))
        if not rows:
            return None
        ctx.log("shift_mean", float((shift * covered).sum() / covered.sum()))
        return skill_advantages(advantages, shift, TokenSignals.of(ctx).mask, config.weight, config.clip)

    @hookimpl
    def post_step(self, ctx):
        if self.config.skills != "library" or ctx.rollout is None:
            return
        ctx.log("kept", keep_verified(self.library, ctx.rollout, self.passed(ctx.rollout, ctx.step), ctx.step))

    @hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict()}

    @hookimpl
    def load_state_dict(self, state):
        self.library.load_state_dict(state["library"])
