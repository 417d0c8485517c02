"""H²SD: correctness picks the teacher. Correct rollouts: a teacher shown the confirmed response sets each token's
magnitude; failed ones: reverse KL from the student to a teacher shown a hint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.blocks.teacher import (
    check_teacher_run, check_teacher_settings, privileged_rows, reverse_kl, score_student, score_teacher,
)
from stackrl.blocks.tokensignals import SignalContext, TokenSignals, magnitude_weights, per_token, reallocate, route
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE



@dataclass
class H2sdConfig:
    # Correct rollouts: the teacher is shown the rollout itself, confirmed correct, with an instruction to
    # rephrase it ({response}: the completion). The default is the built-in task's layout, the response placed as
    # a worked solution before the question (a model that reads instructions takes a sentence: the GPU recipe).
    success_template: str = "{response}\n\n{prompt}"
    # Failed rollouts: the teacher is shown a hint with the key steps and the verified answer.
    hint_template: str = REFERENCE_TEMPLATE
    # The scoring weights of both teachers: the live policy, or the frozen reference (the LoRA-disabled base).
    teacher: str = "policy"
    # Correct rollouts: weights exp(sign(A) * clamp(log pi_T - log pi_S, -clip, clip)), RLSD's rule with the
    # hindsight teacher, normalised to mean 1 per rollout (normalize: false keeps the raw exponentials).
    clip: float = 2.0
    normalize: bool = True
    # Failed rollouts: bound each position's reverse-KL push on any logit (stackrl.blocks.teacher.reverse_kl);
    # null: none.
    kl_clip: Optional[float] = None
    # What counts as a correct rollout.
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0
    # Softmax temperature of every score; null: the run's sampling temperature.
    temperature: Optional[float] = None

    def __post_init__(self):
        check_teacher_settings("h2sd", self)
        if self.clip <= 0:
            raise ConfigError(f"h2sd.clip: must be positive, not {self.clip}")
        if self.kl_clip is not None and self.kl_clip <= 0:
            raise ConfigError(f"h2sd.kl_clip: must be positive (or null), not {self.kl_clip}")


def success_advantages(advantages, gap, correct, mask, clip: float, normalize: bool) -> torch.Tensor:
    """Correct rows: ``A * exp(sign(A) * clamp(gap))`` (normalised per row when ``normalize``); failed rows: ``A``.

    ``gap`` is the hindsight teacher's log-prob of each token minus the student's, ``(N, T)``.
    """
    weights = route(correct, magnitude_weights(gap, advantages, mask, clip), mask.to(gap.dtype))
    if normalize:
        return reallocate(advantages, weights, mask)
    return per_token(advantages, mask) * weights


class H2sd(Plugin):
    """Hindsight magnitudes on correct rollouts (advantage stage), reverse KL to a hinted teacher on failed ones
    (a loss term)."""

    Config = H2sdConfig
    activity = "completions got hindsight credit (correct ones) or a hinted teacher to distil from (failed ones)"

    def check_run(self, run):
        check_teacher_run(run, self, "success_template", "hint_template")

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward}

    def correct(self, rollout, step: int) -> torch.Tensor:
        return rollout.passing(
            self.config.correct_reward, self.config.correct_threshold, key=f"{self.name}.correct_reward", step=step
        )

    def temperature(self, ctx) -> float:
        return ctx.sampling_temperature if self.config.temperature is None else self.config.temperature

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        signals = TokenSignals.of(ctx)
        hindsight = SignalContext(f"{self.name}.success_template", self.config.success_template)
        gap = signals.gap(hindsight, model=self.config.teacher, temperature=self.temperature(ctx))
        correct = self.correct(ctx.rollout, ctx.step)
        reshaped = success_advantages(advantages, gap, correct, signals.mask, self.config.clip, self.config.normalize)
        credited = (reshaped != per_token(advantages, signals.mask)).any(dim=1) & correct
        failed = [i for i in privileged_rows(ctx.rollout, self.config.hint_template) if not correct[i]]
        ctx.acted(int(credited.sum()) + len(failed), of=len(ctx.rollout))
        return reshaped

    def failure_divergence(self, ctx, rollout, *, grad: bool) -> torch.Tensor:
        """Reverse KL(student || hinted teacher) at every completion token of ``rollout``, ``(P,)``."""
        everywhere = [range(len(ids)) for ids in rollout.completion_ids]
        common = dict(positions=everywhere, temperature=self.temperature(ctx), rollout=rollout, full_vocab=True)
        teacher = score_teacher(
            ctx, self.config.hint_template, model=self.config.teacher, where=f"{self.name}.hint_template", **common
        )
        student = score_student(ctx, grad=grad, **common)
        return reverse_kl(student.vocab_logprobs, teacher.vocab_logprobs, clip=self.config.kl_clip)

    @hookimpl
    def loss_term(self, ctx):
        # A row without an answer has no hint (and no correctness): it is not distilled.
        correct = self.correct(ctx.rollout, ctx.step)
        failed = [i for i in privileged_rows(ctx.rollout, self.config.hint_template) if not correct[i]]
        ctx.log("distilled_rows", len(failed) / max(1, len(ctx.rollout)))
        if not failed:
            return None
        return self.failure_divergence(ctx, ctx.rollout.select(failed), grad=ctx.training).mean()
