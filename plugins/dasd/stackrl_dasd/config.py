"""Every setting of the DASD plugin. The paper's router and gate are read from a secondary summary of it (no code is
public); the values it does not give are guesses, said so in the README."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl.blocks.tokensignals import TeacherGapSettings


@dataclass
class DasdConfig(TeacherGapSettings):
    # form "advantage": the paper's sampled-token form, a routed correction added to GRPO's advantage,
    # A_t = A + scale * omega_t * delta_t (the reward keeps the run anchored); "loss": a loss term that descends a
    # full-vocabulary JSD to the teacher at low-entropy tokens and ascends it at high-entropy ones (on the built-in
    # model it destroys the greedy accuracy; see the README). The teacher_template's {solution} is the reference
    # trace the student never sees.
    section: ClassVar[str] = "dasd"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {
        **TeacherGapSettings.choices, "entropy_of": ("student", "teacher"), "threshold_kind": ("quantile", "fixed"),
    }
    # The advantage form's weight beta of the routed correction next to GRPO's advantage.
    scale: float = 0.03
    # Whose next-token entropy routes a token: the student's (the exploration the push protects is the
    # student's), or the teacher's.
    entropy_of: str = "student"
    # "quantile": tokens above this quantile of the token entropies are pushed (0.8: the top fifth), taken over
    # each completion in the advantage form (the paper's trajectory-local quantile) and over the micro-batch in
    # the loss form; "fixed": tokens above `threshold` nats are pushed. Tokens at or below it are pulled.
    threshold_kind: str = "quantile"
    threshold: float = 0.8
    # The loss form only. The pull: the generalized JSD with mixture weight pull_beta (0: forward KL(teacher || student), 1: reverse
    # KL; 0.5 the JSD, as OPSD).
    pull_beta: float = 0.5
    # The push: minus the generalized JSD with push_beta strictly inside (0, 1), so that no token can gain more
    # than the binary entropy of push_beta (log 2 at 0.5), times push_weight.
    push_beta: float = 0.5
    push_weight: float = 1.0

    def check(self):
        super().check()
        if self.threshold_kind == "quantile" and not 0.0 <= self.threshold <= 1.0:
            self.refuse("threshold", f"a quantile must lie in [0, 1], not {self.threshold}")
        if self.threshold_kind == "fixed" and self.threshold < 0:
            self.refuse("threshold", f"an entropy in nats must be non-negative, not {self.threshold}")
        if not 0.0 <= self.pull_beta <= 1.0:
            self.refuse("pull_beta", f"must lie in [0, 1], not {self.pull_beta}")
        if not 0.0 < self.push_beta < 1.0:
            self.refuse("push_beta", f"must lie strictly inside (0, 1), where the push is bounded, not {self.push_beta}")
        if self.push_weight < 0:
            self.refuse("push_weight", f"must be non-negative, not {self.push_weight}")
