"""π-Distill: joint teacher-student training with privileged information ("Privileged Information Distillation
for Language Models", arXiv 2602.04942)."""

from stackrl_pidistill.config import PiDistillConfig
from stackrl_pidistill.objective import student_and_teacher_terms
from stackrl_pidistill.plugin import PiDistill

__all__ = ["PiDistill", "PiDistillConfig", "student_and_teacher_terms"]
