"""TRIAGE's settings (the config section ``triage:``)."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl_triage.labels import LABEL_TEMPLATE, ROLES


@dataclass
class TriageConfig:
    # The auxiliary model that labels the steps (its name under aux_models: a rule, an hf model or an openai
    # server). Empty: the plugin's own rule labeller of the built-in task (labels.rule_labels, the rule
    # `triage_steps` an aux model of backend `rule` names), called in the process without an aux model.
    labeller: str = ""
    # The labeller's request: {prompt} the question, {steps} the completion's lines numbered "1. ..."; the reply
    # has one "<k>. <role>" line per step.
    template: str = LABEL_TEMPLATE
    max_new_tokens: int = 128  # the labeller's reply length (a model labeller; the rule ignores it)
    # The fixed role constants added to the outcome advantage of a segment's tokens, each in [-1, 1]. The paper's
    # values are not public; these are ours, at a tenth to a third of a GRPO advantage's unit scale.
    progress: float = 0.1
    exploration: float = 0.1
    infrastructure: float = -0.1
    regression: float = -0.3

    def __post_init__(self):
        if self.labeller in ("policy", "reference"):
            raise stackrl.ConfigError(f"triage.labeller: names an auxiliary model (aux_models), not '{self.labeller}'")
        missing = [field for field in ("{prompt}", "{steps}") if field not in self.template]
        if missing:
            raise stackrl.ConfigError(f"triage.template: must contain {' and '.join(missing)}")
        if self.max_new_tokens < 1:
            raise stackrl.ConfigError(f"triage.max_new_tokens: must be at least 1, not {self.max_new_tokens}")
        for role in ROLES:
            value = getattr(self, role)
            if not -1.0 <= value <= 1.0:
                raise stackrl.ConfigError(f"triage.{role}: a role constant must lie in [-1, 1], not {value}")
        if self.regression > self.progress:
            raise stackrl.ConfigError(
                f"triage.regression: must not exceed triage.progress ({self.regression} > {self.progress}): a wrong "
                "step would be credited above a right one")

    def constants(self) -> dict[str, float]:
        return {role: getattr(self, role) for role in ROLES}
