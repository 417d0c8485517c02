"""Every setting of the OPSD plugin, with the authors' defaults where their code has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from stackrl.blocks.teacher import TeacherSettings

# The authors' structure in our words: the problem, the reference solution, a transition asking for one's own
# reasoning toward the same answer, then the instruction to reason step by step.
TEACHER_TEMPLATE = (
    "{prompt}\n\nA reference solution to this problem:\n{solution}\n\n"
    "Having understood the reference solution and why each of its steps holds, now set out your own step-by-step "
    "reasoning that reaches the same final answer to the problem above.\n"
    "Reason step by step, and put your final answer within \\boxed{{}}.\n"
)


@dataclass
class OpsdConfig(TeacherSettings):
    # `teacher`, the teacher's weights. "policy": the live policy (the authors' default); "reference": the frozen
    # reference model, or the base model with the LoRA adapter disabled (the authors' `fixed_teacher`, which they
    # recommend); "ema": an exponential moving average of the policy, updated after every optimizer step.
    # `temperature`: null is the run's sampling temperature, as the authors divide both logits by theirs.
    section: ClassVar[str] = "opsd"
    teachers: ClassVar[tuple[str, ...]] = ("policy", "reference", "ema")
    # The teacher's prompt, formatted with {prompt} (the dataset prompt, or its last user message) and the
    # dataset columns: {solution} is the privileged text the student never sees.
    teacher_template: str = TEACHER_TEMPLATE
    ema_decay: float = 0.999
    # Generalized JSD: beta * KL(teacher || m) + (1 - beta) * KL(student || m), m = beta * teacher + (1 - beta)
    # * student; beta = 0 is forward KL(teacher || student), 1 reverse KL (TRL's GKD convention).
    beta: float = 0.5
    # Renormalise both distributions over the teacher's top-k tokens before the divergence (null: full vocabulary).
    top_k: Optional[int] = None
    # Distil only the rollouts the outcome reward `correct_reward` scores at least `correct_threshold`
    # ("OPSD as compression"); other rows are not scored at all.
    correct_only: bool = False
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0

    def check(self):
        if not 0.0 <= self.ema_decay < 1.0:
            self.refuse("ema_decay", f"must lie in [0, 1), not {self.ema_decay}")
        if not 0.0 <= self.beta <= 1.0:
            self.refuse("beta", f"must lie in [0, 1], not {self.beta}")
