"""Every setting of the beta-OPSD plugin. The abstract names beta only; the rest are choices, stated in the README."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError
from stackrl.blocks.teacher import WORKED_SOLUTION_TEMPLATE, check_teacher_settings

# "initial": the policy's weights when training begins, kept as this plugin's snapshot; "reference": the host's
# frozen reference model (the LoRA-disabled base, or TRL's reference model when trainer.beta > 0).
REFERENCES = ("initial", "reference")
TEACHERS = ("policy", *REFERENCES)
DIVERGENCES = ("reverse_kl", "forward_kl")


@dataclass
class BetaOpsdConfig:
    # The weight of the KL anchor to the reference policy. The target is softmax((1 - 1/beta) z_ref + z_T / beta):
    # beta = 1 is the teacher alone (plain OPSD), larger beta moves it toward the reference, beta < 1 past the
    # teacher, away from the reference. 2 (halfway along the path) is our default; the abstract gives none.
    beta: float = 2.0
    # The teacher's prompt, formatted with {prompt} (the dataset prompt, or its last user message) and the
    # dataset columns: {solution} is the privileged text the student never sees.
    teacher_template: str = WORKED_SOLUTION_TEMPLATE
    teacher: str = "policy"
    reference_model: str = "initial"
    # KL(student || target), the divergence whose minimum the beta objective's optimum is; or KL(target || student).
    divergence: str = "reverse_kl"
    # Credit each sampled token with the divergences it leads to later in its completion (the return-to-go),
    # which makes the loss's gradient that of the whole completion's divergence; false: token by token only.
    return_to_go: bool = True
    # All three distributions are softmax(logits / temperature); null: the run's sampling temperature.
    temperature: Optional[float] = None


def check(config: BetaOpsdConfig) -> None:
    """Refuse settings no run could use, naming the key (the host has already checked the types)."""

    def refuse(key: str, message: str):
        raise ConfigError(f"betaopsd.{key}: {message}")

    check_teacher_settings("betaopsd", config, TEACHERS)
    if config.beta <= 0:
        refuse("beta", f"must be positive (1: plain OPSD; larger: nearer the reference), not {config.beta}")
    for key, value, allowed in (("reference_model", config.reference_model, REFERENCES),
                                ("divergence", config.divergence, DIVERGENCES)):
        if value not in allowed:
            refuse(key, f"must be one of {', '.join(allowed)}, not '{value}'")
