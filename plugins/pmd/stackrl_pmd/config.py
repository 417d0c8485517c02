"""Every setting of the PMD plugin; where the paper is silent, SDPO's defaults, on which it builds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from stackrl.blocks.teacher import TeacherSettings

MEMORY = "memory"  # the rollout column, and the teacher template's field, of each row's remembered solution

# The built-in task's reference layout (stackrl.tasks.arithmetic.REFERENCE_TEMPLATE) with the remembered solution in
# the worked solution's place: the built-in model was taught to follow a solution placed before the question.
MEMORY_TEMPLATE = "{memory}\n\n{prompt}"


@dataclass
class PmdConfig(TeacherSettings):
    # `teacher`: the live policy (PMD's self-teacher, co-evolving with the memory) or the frozen reference;
    # `temperature`: null is the run's sampling temperature.
    section: ClassVar[str] = "pmd"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"distill": ("all", "failed"), "update": ("latest", "first")}
    # The teacher's prompt: {memory} is the remembered solution, with {prompt} and the dataset columns.
    teacher_template: str = MEMORY_TEMPLATE
    # Which rows of a remembered prompt are distilled: "all" (SDPO reprompts every rollout that has a
    # demonstration) or "failed" (those the outcome reward does not pass).
    distill: str = "all"
    # How a prompt's memory follows the policy: "latest" replaces it by the newest verified solution (co-evolution);
    # "first" keeps the first one ever verified (the paper's frozen-memory ablation).
    update: str = "latest"
    # What counts as verified: the component `correct_reward` at least `correct_threshold` (SDPO's 1.0).
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0
    # Generalized JSD, TRL's GKD convention: 0 forward KL(teacher || student), 1 reverse; SDPO's paper runs use 0.5.
    beta: float = 0.5
    # Renormalise both distributions over the teacher's top-k tokens (SDPO: 100 on a large vocabulary); null: all.
    top_k: Optional[int] = None

    def check(self):
        if not 0.0 <= self.beta <= 1.0:
            self.refuse("beta", f"must lie in [0, 1], not {self.beta}")
