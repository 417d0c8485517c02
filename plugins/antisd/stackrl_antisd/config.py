"""Every setting of the AntiSD plugin. The abstract names no value; the defaults are stated guesses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl.blocks.tokensignals import TeacherGapSettings


@dataclass
class AntisdConfig(TeacherGapSettings):
    # form "advantage": the paper's form, A_t = A - scale * phi(u_t) with phi(u) = (softplus(u) - log 2) / 2 and
    # u_t = log pi_T(y_t) - log pi(y_t) of the sampled token, added to GRPO's advantage; "loss": a loss term
    # ascending the full-vocabulary generalized JSD (weighted by losses.antisd). The teacher_template's
    # {solution} is the verified solution the student never sees.
    section: ClassVar[str] = "antisd"
    # The advantage form's weight lambda of the bounded term next to GRPO's advantage.
    scale: float = 0.1
    # The loss form only: the mixture weight of the generalized JSD that is ascended. Strictly inside (0, 1), where the divergence is
    # bounded per token by the binary entropy of beta: log 2 at 0.5, the plain Jensen-Shannon divergence.
    beta: float = 0.5
    # The gate: the term is off once the teacher's mean entropy over the batch's completion tokens falls below
    # gate_threshold nats, or with gate_relative below gate_threshold times its value on the first batch.
    gate_threshold: float = 0.5
    gate_relative: bool = True
    # The gate compares a moving average of the batch means, gate_smoothing the weight of the past (0: each
    # batch's own), so that one unusual batch does not close it.
    gate_smoothing: float = 0.5
    # Latched: once closed, the gate stays closed (the abstract's "disables the term once ... collapses"), and
    # the teacher's entropy is no longer computed. Unlatched, the term comes back when the entropy recovers.
    gate_latch: bool = True

    def check(self):
        super().check()
        if not 0.0 < self.beta < 1.0:
            self.refuse("beta", f"must lie strictly inside (0, 1), where the divergence is bounded, not {self.beta}")
        if self.gate_threshold < 0 or (self.gate_relative and self.gate_threshold > 1):
            bound = "[0, 1] (a fraction of the first batch's entropy)" if self.gate_relative else "[0, inf) nats"
            self.refuse("gate_threshold", f"must lie in {bound}, not {self.gate_threshold}")
        if not 0.0 <= self.gate_smoothing < 1.0:
            self.refuse("gate_smoothing", f"must lie in [0, 1), not {self.gate_smoothing}")
