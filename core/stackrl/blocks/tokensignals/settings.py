"""The config piece of a method whose privileged teacher's token gap acts in one of two forms: it moves GRPO's
per-token advantages (the sampled tokens only), or it becomes a full-vocabulary divergence loss term."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from stackrl.blocks.teacher import TeacherSettings
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE

FORMS = ("advantage", "loss")


@dataclass
class TeacherGapSettings(TeacherSettings):
    """:class:`~stackrl.blocks.teacher.TeacherSettings` with ``form`` ("advantage" or "loss"), ``scale`` (the advantage
    form's weight of the method's term next to GRPO's advantage; a subclass sets its own default) and
    ``teacher_template`` (formatted with ``{prompt}`` and the dataset columns; the default puts the solution, a
    blank line, then the question). The teacher may be any model ``ctx.score`` knows."""

    teachers: ClassVar[Optional[tuple[str, ...]]] = None
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"form": FORMS}
    form: str = "advantage"
    scale: float = 0.1
    teacher_template: str = REFERENCE_TEMPLATE

    def check(self):
        if self.scale < 0:
            self.refuse("scale", f"must be non-negative, not {self.scale}")
