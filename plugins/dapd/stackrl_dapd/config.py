"""Every setting of the DAPD plugin, with the authors' values where their code has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from stackrl.blocks.teacher import TeacherSettings

# The authors' teacher prompt in our words: the problem, a reference solution, a request to reason it out
# independently toward the same answer. `{reference}` is filled by the plugin: with the data's reference solution
# (the reference-conditioned view) or with the row's own rollout (the rollout-conditioned view).
TEACHER_TEMPLATE = (
    "{prompt}\n\nA reference solution to this problem:\n{reference}\n\n"
    "Having understood why each of its steps holds, now reason independently, in your own words, toward the same "
    "final answer to the problem above.\nReason step by step, and put your final answer within \\boxed{{}}.\n"
)


@dataclass
class DapdConfig(TeacherSettings):
    # `teacher`: the weights of the fixed anchor of the four Inference and Privileged Anchor terms (the authors'
    # "base": the model with its LoRA adapter disabled). "initial": a copy of the policy taken when training begins
    # (for a LoRA run the same as the base, the adapter starting at zero; it works without a reference model);
    # "reference": the run's reference model. `temperature`: null is the run's sampling temperature, as the
    # authors divide every logit by theirs.
    section: ClassVar[str] = "dapd"
    teachers: ClassVar[tuple[str, ...]] = ("initial", "reference")
    teacher: str = "initial"
    # The teacher prompt, formatted with {prompt}, the data's columns and {reference} (filled by the plugin).
    teacher_template: str = TEACHER_TEMPLATE
    # The column holding the reference solution: the privileged text and the reference completion y* the
    # reference-side terms are computed on.
    reference_column: str = "solution"
    # The reference completion is cut to this many tokens (null: whole); the authors cut it at their completion
    # length.
    max_reference_tokens: Optional[int] = None
    # The two Entangled Distillation terms are anchored on a hard copy of the policy, refreshed every this many
    # optimizer steps (the authors' snapshot_interval).
    snapshot_interval: int = 100
    # Each vocabulary entry's term of the forward KL is clipped above at this value (the authors' component_clip;
    # null: no clip).
    component_clip: Optional[float] = 0.05
    # The six terms' weights (the authors' DAPD_WEIGHTS, summing to 2). Rollout-to-reference direction
    # (the reference supervises the rollout y):
    entangled_rollout: float = 2.0 / 15.0      # KL(sg Cross^y_snapshot || None^y), OPSD's term
    inference_reference: float = 2.0 / 15.0    # KL(sg None^y*_base || Self^y*)
    privileged_rollout: float = 2.0 / 15.0     # KL(sg Cross^y_base || Self^y)
    # Reference-to-rollout direction (the rollout supervises the reference y*):
    entangled_reference: float = 2.0 / 5.0     # KL(sg Cross^y*_snapshot || None^y*)
    inference_rollout: float = 2.0 / 5.0       # KL(sg None^y_base || Self^y)
    privileged_reference: float = 4.0 / 5.0    # KL(sg Cross^y*_base || Self^y*)

    def check(self):
        if self.snapshot_interval < 1:
            self.refuse("snapshot_interval", f"must be at least 1, not {self.snapshot_interval}")
        if self.component_clip is not None and self.component_clip <= 0:
            self.refuse("component_clip", f"must be positive (or null for no clip), not {self.component_clip}")
        if self.max_reference_tokens is not None and self.max_reference_tokens < 1:
            self.refuse("max_reference_tokens", f"must be at least 1 (or null), not {self.max_reference_tokens}")
        for name in TERMS:
            if getattr(self, name) < 0:
                self.refuse(name, f"must be non-negative, not {getattr(self, name)}")
        if not any(getattr(self, name) for name in TERMS):
            self.refuse("entangled_rollout", "the six term weights are all 0: nothing would be distilled")
        if "{reference}" not in self.teacher_template:
            self.refuse("teacher_template", "must contain {reference}, where the plugin puts the reference "
                                            "solution or the rollout")

    def weights(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in TERMS}


TERMS = ("entangled_rollout", "inference_reference", "privileged_rollout",
         "entangled_reference", "inference_rollout", "privileged_reference")
