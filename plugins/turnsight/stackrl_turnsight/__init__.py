"""The stackrl plugin `turnsight`: turn-level hindsight self-distillation as a sign-keeping advantage scale."""

from stackrl_turnsight.hindsight import agreed, group_normalized, hindsight, observations, scale, teacher_context, view_signal
from stackrl_turnsight.plugin import Turnsight, TurnsightConfig

__all__ = [
    "Turnsight", "TurnsightConfig", "agreed", "group_normalized", "hindsight", "observations", "scale",
    "teacher_context", "view_signal",
]
