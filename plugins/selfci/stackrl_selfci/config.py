"""Every setting of the SELFCI plugin: the two teacher contexts, their weights and the teacher's weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl.blocks.teacher import TeacherSettings

# The two feedback notes, appended after the prompt as the authors' trainer appends them (our paraphrase of their
# wording): the utility teacher is told which details are appropriate to share, the privacy teacher which are not.
UTILITY_TEMPLATE = (
    "{prompt}\n\n[NOTE] Only these keywords are appropriate to share in this particular context:\n{allowed_feedbacks}"
)
PRIVACY_TEMPLATE = (
    "{prompt}\n\n[NOTE] These keywords are inappropriate to share in this particular context:\n{disallowed_feedbacks}"
)

# "initial": the policy's weights when training begins, kept as this plugin's snapshot (the authors' frozen teacher
# under full fine-tuning); "reference": the host's frozen reference (the base with the LoRA adapter off);
# "policy": the live weights.
TEACHERS = ("initial", "reference", "policy")


@dataclass
class SelfciConfig(TeacherSettings):
    section: ClassVar[str] = "selfci"
    teachers: ClassVar[tuple[str, ...]] = TEACHERS
    # The authors' teacher is a frozen copy of the starting model.
    teacher: str = "initial"
    # The utility teacher's prompt: {prompt} and the row's columns; the feedback that keeps task-relevant details.
    utility_template: str = UTILITY_TEMPLATE
    # The privacy teacher's prompt: the feedback that names what must not be disclosed.
    privacy_template: str = PRIVACY_TEMPLATE
    # Weights of KL(student || utility teacher) and KL(student || privacy teacher): the authors' forward_weight and
    # backward_weight, both 1.0 by default. The loss is their weighted sum divided by max(sum of weights, 1).
    utility_weight: float = 1.0
    privacy_weight: float = 1.0

    def check(self):
        for key in ("utility_weight", "privacy_weight"):
            if getattr(self, key) < 0:
                self.refuse(key, f"must be >= 0, not {getattr(self, key)}")
        if self.utility_weight + self.privacy_weight <= 0:
            self.refuse("privacy_weight", "utility_weight + privacy_weight must be positive (both are 0)")
        if self.utility_template == self.privacy_template:
            self.refuse("privacy_template", "is the utility_template: the two teachers need different contexts")
