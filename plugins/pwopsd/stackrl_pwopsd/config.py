"""Every setting of the PW-OPSD plugin; the paper names the position weight and the clip but gives no values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from stackrl.blocks.teacher import WORKED_SOLUTION_TEMPLATE, TeacherSettings


@dataclass
class PwOpsdConfig(TeacherSettings):
    # `teacher`: "policy", the live policy shown the solution; "reference", the LoRA-disabled base (or TRL's
    # reference model). Both distributions are softmax(logits / temperature).
    section: ClassVar[str] = "pwopsd"
    # The teacher's prompt, formatted with {prompt} (the dataset prompt, or its last user message) and the
    # dataset columns: {solution} is the privileged text the student never sees.
    teacher_template: str = WORKED_SOLUTION_TEMPLATE
    # How hard the forward KL may push any one logit of the student (stackrl.blocks.teacher.forward_kl; null: no clip).
    # The paper clips without saying how much: 0.05 is the value the project's other clipped KL (trace) uses.
    clip: Optional[float] = 0.05
    # The weight at relative position u = (t + 1) / T: floor + (1 - floor) * u ** position_power, scaled to mean 1
    # per completion. 1 grows linearly (the default: the paper says only "increasing"), 0 is uniform.
    position_power: float = 1.0
    position_floor: float = 0.0
    # Renormalise both distributions over the teacher's top-k tokens before the divergence (null: full vocabulary).
    top_k: Optional[int] = None

    def check(self):
        if self.clip is not None and self.clip <= 0:
            self.refuse("clip", f"must be positive (or null for no clip), not {self.clip}")
        if self.position_power < 0:
            self.refuse("position_power", f"must be at least 0 (0: uniform weights), not {self.position_power}")
        if not 0.0 <= self.position_floor <= 1.0:
            self.refuse("position_floor", f"must lie in [0, 1], not {self.position_floor}")
