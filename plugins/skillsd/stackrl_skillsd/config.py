"""Every setting of the Skill-SD plugin; the README's table says which are the authors' and which are ours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from stackrl.blocks.experience import ExperienceSettings
from stackrl.blocks.teacher import TeacherSettings

SKILL = "skill"  # the rollout column, and the teacher template's field, of each row's retrieved skill

# The built-in task's reference layout (stackrl.tasks.arithmetic.REFERENCE_TEMPLATE) with the skill in the worked
# solution's place: the built-in model was taught to follow a solution placed before the question.
SKILL_TEMPLATE = "{skill}\n\n{prompt}"

# The summariser's request (skill_form: summary), in our words after the paper's description of a skill: what
# succeeded, what went wrong, and the workflow to follow. {prompt} is the task, {completion} the trajectory.
SUMMARY_TEMPLATE = (
    "Here is a task and an attempt at it.\n\nTask:\n{prompt}\n\nAttempt:\n{completion}\n\n"
    "Summarise, in a few short lines, a skill for tasks like this one: what in the attempt worked, which mistakes "
    "to avoid, and the workflow that reaches the answer.\nSkill:"
)


@dataclass
class SkillsdConfig(TeacherSettings):
    # `teacher`: whose weights read the skill. "synced": a copy of the policy taken at the start and again every
    # `sync_every` steps (the paper's teacher, synchronised with the improving student); "policy": the live
    # policy (synced at every step, no copy kept); "reference": the frozen reference model.
    # `temperature`: null is the run's sampling temperature (TRL's loss divides its logits by it).
    section: ClassVar[str] = "skillsd"
    teachers: ClassVar[tuple[str, ...]] = ("synced", "policy", "reference")
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"skill_form": ("completion", "summary")}
    teacher: str = "synced"
    sync_every: int = 10
    # The teacher's prompt: {skill} is the retrieved skill, with {prompt} and the dataset columns. The student
    # always sees the plain prompt.
    teacher_template: str = SKILL_TEMPLATE
    # What a skill is: "completion", the text of the successful completion itself (the raw-trajectory analogue);
    # "summary", the policy's own summary of it, written after the step from `summary_template` (greedy, at most
    # `summary_tokens` new tokens), as the paper's summariser does.
    skill_form: str = "completion"
    summary_template: str = SUMMARY_TEMPLATE
    summary_tokens: int = 256
    # What counts as a success worth a skill: the component `correct_reward` at least `correct_threshold`.
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0
    # The cap c on the importance weight min(c, pi_theta / pi_behaviour) of each distilled token.
    truncation: float = 3.0
    # Retrieve a skill only where the ROUGE-L F of the row's prompt and the skill's prompt is at least this (0: the
    # best match, however weak; 1: only the prompt's own success, what arithmetic needs: a similar problem's
    # solution has other numbers).
    min_similarity: float = 0.0
    # The library: one skill per prompt (its latest success), retrieved by the similarity of the prompts.
    experience: ExperienceSettings = field(default_factory=lambda: ExperienceSettings(capacity=1024, per_prompt=1))

    def check(self):
        if self.sync_every < 1:
            self.refuse("sync_every", f"must be at least 1, not {self.sync_every}")
        if not self.truncation > 0:
            self.refuse("truncation", f"must be positive, not {self.truncation}")
        if not 0.0 <= self.min_similarity <= 1.0:
            self.refuse("min_similarity", f"must lie in [0, 1], not {self.min_similarity}")
        if self.summary_tokens < 1:
            self.refuse("summary_tokens", f"must be at least 1, not {self.summary_tokens}")
        if "{skill}" not in self.teacher_template:
            self.refuse("teacher_template", "must name {skill}, the retrieved skill only the teacher sees")
