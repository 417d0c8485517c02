"""Every setting of the beta-OPSD plugin. The abstract names beta only; the rest are choices, stated in the README."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl.blocks.teacher import WORKED_SOLUTION_TEMPLATE, TeacherSettings

# "initial": the policy's weights when training begins, kept as this plugin's snapshot; "reference": the host's
# frozen reference model (the LoRA-disabled base, or TRL's reference model when trainer.beta > 0).
REFERENCES = ("initial", "reference")
TEACHERS = ("policy", *REFERENCES)
DIVERGENCES = ("reverse_kl", "forward_kl")


@dataclass
class BetaOpsdConfig(TeacherSettings):
    # All three distributions are softmax(logits / temperature); null: the run's sampling temperature.
    section: ClassVar[str] = "betaopsd"
    teachers: ClassVar[tuple[str, ...]] = TEACHERS
    # The weight of the KL anchor to the reference policy. The target is softmax((1 - 1/beta) z_ref + z_T / beta):
    # beta = 1 is the teacher alone (plain OPSD), larger beta moves it toward the reference, beta < 1 past the
    # teacher, away from the reference. 2 (halfway along the path) is our default; the abstract gives none.
    beta: float = 2.0
    # The teacher's prompt, formatted with {prompt} (the dataset prompt, or its last user message) and the
    # dataset columns: {solution} is the privileged text the student never sees.
    teacher_template: str = WORKED_SOLUTION_TEMPLATE
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"reference_model": REFERENCES, "divergence": DIVERGENCES}
    reference_model: str = "initial"
    # KL(student || target), the divergence whose minimum the beta objective's optimum is; or KL(target || student).
    divergence: str = "reverse_kl"
    # Credit each sampled token with the divergences it leads to later in its completion (the return-to-go),
    # which makes the loss's gradient that of the whole completion's divergence; false: token by token only.
    return_to_go: bool = True

    def check(self):
        if self.beta <= 0:
            self.refuse("beta", f"must be positive (1: plain OPSD; larger: nearer the reference), not {self.beta}")
