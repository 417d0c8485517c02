"""Every setting of the π-Distill plugin, with the authors' values where their code has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl.blocks.teacher import TeacherSettings
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE


@dataclass
class PiDistillConfig(TeacherSettings):
    # The teacher is the live policy shown the privileged information: the same weights as the student, so
    # `teacher` is fixed to "policy" (joint training of one model is the method). `temperature`: null is the
    # run's sampling temperature, the one TRL's loss divides the teacher's logits by.
    section: ClassVar[str] = "pidistill"
    teachers: ClassVar[tuple[str, ...]] = ("policy",)
    # The teacher's prompt, which the rollout is sampled from and GRPO's loss trains: {prompt} and the dataset
    # columns ({solution} is the privileged information). The default is the built-in task's reference layout.
    teacher_template: str = REFERENCE_TEMPLATE
    # J = alpha * J_teacher + (1 - alpha) * J_student. 0.5 is the setting the authors find most stable.
    alpha: float = 0.5
    # The weight of each side's KL to the other: KL(pi_T || sg pi_S) in the teacher's objective and
    # KL(sg pi_T || pi_S) (the student's NLL of the teacher's tokens, Rao-Blackwellised) in the student's.
    beta: float = 0.1
    # The student's per-token importance ratio pi_S / sg pi_T is clipped PPO-style to [1 - clip_low, 1 + clip_high]
    # (the authors' code: 0.8 and 1.2).
    clip_low: float = 0.2
    clip_high: float = 0.2

    def check(self):
        if not 0.0 <= self.alpha <= 1.0:
            self.refuse("alpha", f"must lie in [0, 1], not {self.alpha}")
        if self.beta < 0:
            self.refuse("beta", f"must be non-negative, not {self.beta}")
        if not 0.0 <= self.clip_low < 1.0:
            self.refuse("clip_low", f"must lie in [0, 1), not {self.clip_low}")
        if self.clip_high < 0:
            self.refuse("clip_high", f"must be non-negative, not {self.clip_high}")
