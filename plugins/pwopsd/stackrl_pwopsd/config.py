"""Every setting of the PW-OPSD plugin; the paper names the position weight and the clip but gives no values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError
from stackrl.blocks.teacher import WORKED_SOLUTION_TEMPLATE, check_teacher_settings



@dataclass
class PwOpsdConfig:
    # The teacher's prompt, formatted with {prompt} (the dataset prompt, or its last user message) and the
    # dataset columns: {solution} is the privileged text the student never sees.
    teacher_template: str = WORKED_SOLUTION_TEMPLATE
    # "policy": the live policy shown the solution; "reference": the LoRA-disabled base (or TRL's reference model).
    teacher: str = "policy"
    # How hard the forward KL may push any one logit of the student (stackrl.blocks.teacher.forward_kl; null: no clip).
    # The paper clips without saying how much: 0.05 is the value the project's other clipped KL (trace) uses.
    clip: Optional[float] = 0.05
    # The weight at relative position u = (t + 1) / T: floor + (1 - floor) * u ** position_power, scaled to mean 1
    # per completion. 1 grows linearly (the default: the paper says only "increasing"), 0 is uniform.
    position_power: float = 1.0
    position_floor: float = 0.0
    # Both distributions are softmax(logits / temperature); null: the run's sampling temperature.
    temperature: Optional[float] = None
    # Renormalise both distributions over the teacher's top-k tokens before the divergence (null: full vocabulary).
    top_k: Optional[int] = None


def check(config: PwOpsdConfig) -> None:
    """Refuse settings no run could use, naming the key (the host has already checked the types)."""

    def refuse(key: str, message: str):
        raise ConfigError(f"pwopsd.{key}: {message}")

    check_teacher_settings("pwopsd", config)
    if config.clip is not None and config.clip <= 0:
        refuse("clip", f"must be positive (or null for no clip), not {config.clip}")
    if config.position_power < 0:
        refuse("position_power", f"must be at least 0 (0: uniform weights), not {config.position_power}")
    if not 0.0 <= config.position_floor <= 1.0:
        refuse("position_floor", f"must lie in [0, 1], not {config.position_floor}")
