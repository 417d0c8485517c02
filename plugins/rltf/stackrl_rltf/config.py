"""Every setting of the RLTF plugin, with the authors' values as defaults where their code gives them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_TEMPLATE, RETRY_INSTRUCTION

VARIANTS = ("sd", "fm", "both")  # RLTF-SD, RLTF-FM, or both terms at once
FEEDBACKS = ("critic", "policy")  # who writes the feedback on a failed first attempt

# On the built-in task the feedback is a check of the attempt in the judge format (docs/roles.md): the prompt it
# answers is the judge prompt, and the second attempt is asked for after it as a retry after a check.
FEEDBACK_TEMPLATE = JUDGE_TEMPLATE
RETRY_TEMPLATE = JUDGE_TEMPLATE + "{feedback}\n" + RETRY_INSTRUCTION + "\n"


@dataclass
class RltfConfig(OutcomeSettings):
    section: ClassVar[str] = "rltf"  # its metric judges the first and the second attempts
    # "sd": self-distillation, the bare question taught the second attempts made after feedback; "fm": feedback
    # modelling, the feedback predicted from the question and the attempt; "both": the two terms added.
    variant: str = "sd"
    # "critic": the rule critic of the built-in task (stackrl.tasks.roles.judge_reply, a perfect check that works
    # each line of the attempt out afresh and stops at the first wrong one; the authors' judge is a large model
    # told the reference answer); "policy": the policy's own check, sampled from feedback_template (sd only).
    feedback: str = "critic"
    # {prompt}, {attempt}: the prompt the feedback answers; the context of the feedback-modelling term, and what
    # the policy is asked with under feedback: policy.
    feedback_template: str = FEEDBACK_TEMPLATE
    # {prompt}, {attempt}, {feedback}: the prompt of the second attempt.
    retry_template: str = RETRY_TEMPLATE
    # The self-distillation term's weight on each second-attempt token, against one token of the policy loss (the
    # authors' rl_coef, 0.1; they multiply the advantages by it).
    sd_coef: float = 0.1
    # Second-attempt tokens whose log-probability after the bare question is below this are left out of the
    # self-distillation term (the authors' fixed -5.0): tokens the single-turn policy would almost never sample.
    min_logprob: float = -5.0
    # The feedback-modelling term's weight on each feedback token (the authors' sft_loss_weight, 0.1).
    fm_coef: float = 0.1

    def check(self):
        name = self.section
        if self.variant not in VARIANTS:
            raise ConfigError(f"{name}.variant: must be one of {', '.join(VARIANTS)}, not {self.variant!r}")
        if self.feedback not in FEEDBACKS:
            raise ConfigError(f"{name}.feedback: must be one of {', '.join(FEEDBACKS)}, not {self.feedback!r}")
        if self.feedback == "policy" and self.variant != "sd":
            raise ConfigError(f"{name}.feedback: the policy's own check is no target to model; variant "
                              f"{self.variant!r} needs feedback: critic (or variant: sd)")
        for key in ("sd_coef", "fm_coef"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"{name}.{key}: must be positive, not {getattr(self, key)}")
        if not self.min_logprob < 0:
            raise ConfigError(f"{name}.min_logprob: must be negative (a log-probability), not {self.min_logprob}")
        for key, fields in (("feedback_template", ("prompt", "attempt")),
                            ("retry_template", ("prompt", "attempt", "feedback"))):
            template = getattr(self, key)
            missing = [field for field in fields if "{" + field + "}" not in template]
            if missing:
                raise ConfigError(f"{name}.{key}: must contain {{{missing[0]}}}")

    @property
    def distils(self) -> bool:
        return self.variant in ("sd", "both")

    @property
    def models_feedback(self) -> bool:
        return self.variant in ("fm", "both")
