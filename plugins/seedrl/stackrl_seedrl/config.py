"""Every setting of the SEED plugin, with the authors' defaults where their code has one (jinyangwu/OPID)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional

from stackrl.blocks.experience import ExperienceSettings
from stackrl.blocks.teacher import TeacherSettings

SKILL = "skill"  # the rollout column, and the templates' field, of each row's hindsight skill

# The authors' injection in our words: a header naming the skill as guidance for this episode, the skill, then the
# task as the student saw it.
SKILL_TEMPLATE = (
    "A skill learned in hindsight from an attempt at this task; follow it when deciding what to do:\n{skill}\n\n"
    "{prompt}"
)

# The analyser's request (the policy writes the skill from the completed trajectory): a reusable workflow when the
# attempt succeeded, a rule that avoids the failure when it failed (the authors' analyser prompt, in our words).
ANALYSIS_TEMPLATE = (
    "Task:\n{prompt}\n\nA completed attempt at it:\n{response}\n\nOutcome: {outcome}\n\n"
    "Write one short, reusable skill for this kind of task, in the imperative: if the attempt succeeded, the "
    "workflow that made it succeed; if it failed, the rule that would have avoided the failure. Reply with the "
    "skill alone.\n"
)


@dataclass
class SeedrlConfig(TeacherSettings):
    # `teacher`: the weights that re-score the sampled tokens with the skill in context; "policy" is the policy
    # that sampled them (the authors' old policy), "reference" the frozen base. `temperature`: null is the run's
    # sampling temperature.
    section: ClassVar[str] = "seedrl"
    teachers: ClassVar[tuple[str, ...]] = ("policy", "reference")
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"skills": ("policy", "library"), "retrieve": ("same", "similar")}
    # Where each row's skill comes from. "policy": the policy writes it from the row's own completed trajectory
    # through `analysis_template` (the paper: hindsight skills from on-policy trajectories, the policy as analyser).
    # "library": the raw-trajectory analogue for a model that cannot analyse: the skill is a stored verified
    # completion of the row's prompt (`retrieve: same`) or of the most similar stored prompt (`similar`, ROUGE-L
    # or BM25 over the prompts, `experience.retrieval`), kept from earlier steps.
    skills: str = "policy"
    retrieve: str = "same"
    # The teacher's prompt: {skill} is the row's skill, with {prompt} and the dataset columns.
    teacher_template: str = SKILL_TEMPLATE
    # The request that makes the policy write a skill: {prompt}, {response} (the completion), {outcome}
    # ("success" or "failure", by `correct_reward`) and the dataset columns; `skill_tokens` new tokens at most.
    analysis_template: str = ANALYSIS_TEMPLATE
    skill_tokens: int = 128
    # The weight of the skill's log-probability shift next to GRPO's advantage (the authors' ALFWorld script:
    # episode_skill_teacher_advantage_w 0.001), and a clip of the shift to [-clip, clip] before it (null: none,
    # the authors' default).
    weight: float = 0.001
    clip: Optional[float] = None
    # Re-score only the rows `correct_reward` does not pass (the authors' failed_only; off by default).
    failed_only: bool = False
    # What counts as a success: the component `correct_reward` at least `correct_threshold` (the outcome the
    # analyser is told, the rows the library keeps, and `failed_only`).
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0
    # The library of skills (written skills, or the verified completions the analogue keeps), checkpointed.
    experience: ExperienceSettings = field(default_factory=lambda: ExperienceSettings(capacity=1024))

    def check(self):
        if self.weight < 0:
            self.refuse("weight", f"must be non-negative, not {self.weight}")
        if self.clip is not None and self.clip <= 0:
            self.refuse("clip", f"must be positive or null (no clip), not {self.clip}")
        if self.skill_tokens < 1:
            self.refuse("skill_tokens", f"must be at least 1, not {self.skill_tokens}")
        if "{skill}" not in self.teacher_template:
            self.refuse("teacher_template", "must contain {skill}, where the row's skill goes")
        self.experience.check(self.section)
