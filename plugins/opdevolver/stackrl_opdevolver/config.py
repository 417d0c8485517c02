"""Every setting of the OPD-Evolver plugin; the README's table says which defaults are the authors' and which ours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from stackrl.blocks.experience import ExperienceSettings
from stackrl.blocks.teacher import TeacherSettings
from stackrl.plugin import template_fields

# A record as the memory shows it: a past trial of a similar problem (the question and the completion).
RECORD_TEMPLATE = "A past attempt at a similar problem:\n{prompt}\n{completion}\n\n"


@dataclass
class OpdevolverConfig(TeacherSettings):
    # `teacher`: the weights that score the teacher's context ("policy", the paper's self-distillation, or the
    # frozen "reference"); `temperature`: null is the run's sampling temperature.
    section: ClassVar[str] = "opdevolver"
    # The fast loop: the prompt a memory-reading row is sampled and trained on. {memory} is the record it reads
    # (record_template), {prompt} the question.
    reading_template: str = "{memory}{prompt}"
    # The slow loop's teacher: the memory outcomes showed helped ({memory}, empty where none did) plus the
    # hindsight (a data column, here the worked solution), scored on a plain row's completion.
    teacher_template: str = "{memory}{solution}\n\n{prompt}"
    # How one record reads as memory: {prompt} and {completion} of the stored trial.
    record_template: str = RECORD_TEMPLATE
    # Records retrieved per prompt (the fast loop's candidates), by ROUGE-L of the prompts, above `min_utility`.
    candidates: int = 2
    # Rows of each group that read a candidate (round robin over them); the others are plain, distilled rows.
    reading_rows: int = 2
    # Selection floor: a record whose attributed utility fell below it is no longer retrieved.
    min_utility: float = -0.2
    # Attribution: utility <- utility + rate * (gap - utility), gap = mean outcome of the group's rows that read the
    # record minus that of the group's rows that did not.
    utility_rate: float = 0.5
    # The outcome reward component attribution and writing read; rows scoring at least `write_threshold` are written.
    outcome_reward: str = "exact_match"
    write_threshold: float = 1.0
    # Generalized JSD of the distillation (OPSD's): 0 forward KL(teacher || student), 1 reverse KL.
    beta: float = 0.5
    experience: ExperienceSettings = field(default_factory=lambda: ExperienceSettings(
        capacity=256, per_prompt=2, eviction="lowest_utility"))

    def check(self):
        for key in ("reading_template", "teacher_template"):
            if "memory" not in template_fields(getattr(self, key)):
                self.refuse(key, "must place the memory: it names no {memory}")
        unknown = [f for f in template_fields(self.record_template) if f not in ("prompt", "completion")]
        if unknown:
            self.refuse("record_template", f"may use {{prompt}} and {{completion}} only, not {{{unknown[0]}}}")
        if self.candidates < 1:
            self.refuse("candidates", f"must be at least 1, not {self.candidates}")
        if self.reading_rows < 1:
            self.refuse("reading_rows", f"must be at least 1, not {self.reading_rows}")
        if not 0.0 < self.utility_rate <= 1.0:
            self.refuse("utility_rate", f"must lie in (0, 1], not {self.utility_rate}")
        if not 0.0 <= self.beta <= 1.0:
            self.refuse("beta", f"must lie in [0, 1], not {self.beta}")
