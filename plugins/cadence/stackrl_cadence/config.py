"""CADENCE's settings: the teacher, DRIFT's schedule with COVA and FTB, and the CCD and LAP rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from stackrl import ConfigError
from stackrl.rewards import OutcomeSettings

ABSENT = ("error", "skip")


@dataclass
class CadenceConfig(OutcomeSettings):
    """``metric`` and ``answer_column`` (from OutcomeSettings) tell a right answer, for the CCD and LAP reward."""

    section: ClassVar[str] = "cadence"
    # The teacher: a name of the model= name space whose tokenizer is the policy's (an `aux_models:` entry with
    # backend hf, or `reference`). The paper distils a 0.5B student from a 1.5B or 3B teacher of the same family.
    teacher: str = "teacher"
    # A teacher the run does not declare: refused (error), or DRIFT left out with a note and a warning (skip; the
    # CCD and LAP reward still act: they need no teacher).
    absent: str = "error"
    # DRIFT: the per-token advantage (1 - beta) * (-k_t) + beta * A_fwd_t, k_t = log pi_student - log pi_teacher of
    # the sampled token, added to the reward's advantage with this weight (0: DRIFT off; ours, the paper gives
    # no combination weight).
    drift_scale: float = 1.0
    # The forward-KL surrogate's importance weight exp(-k_t) is clipped at this (the paper's c = 10).
    weight_clip: float = 10.0
    # beta's cosine schedule, from beta_start to beta_end over anneal_steps training steps (the paper: 1 -> 0 over
    # the run; anneal_steps is ours, the run's length in the recipes).
    beta_start: float = 1.0
    beta_end: float = 0.0
    anneal_steps: int = 200
    # COVA: coverage of the teacher's top-k tokens (student probability above tau), the paper's k = 20 and
    # tau = 1e-3; its moving average (ours: decay 0.9) past the gate shortens beta by up to alpha_max.
    cova: bool = True
    coverage_k: int = 20
    coverage_tau: float = 1.0e-3
    coverage_decay: float = 0.9
    gate: float = 0.5  # ours: the paper validates it on a held-out split and gives no value
    alpha_max: float = 0.5  # ours: no published value
    # FTB: each token's DRIFT advantage times 1 + boost * min(1, H_teacher / entropy_ref) (the paper's reference
    # 2.0 nats; boost is ours, no published value). 0: off.
    boost: float = 0.5
    entropy_ref: float = 2.0
    # Both distributions at this temperature; null: the run's sampling temperature (which the loss divides by).
    temperature: Optional[float] = None
    # Rows per forward of the full distributions (student and teacher, no gradient, in the advantage stage).
    rows_per_forward: int = 8
    # CCD: a wrong numeric answer earns partial_credit * exp(-|answer - reference| / (tolerance * max(1, |ref|)));
    # a right one 1, no answer 0 (the form and values are ours: the paper's formula is not public). 0: binary.
    partial_credit: float = 0.5
    tolerance: float = 0.1
    # LAP: a right completion earns brevity * (1 - length / longest right completion of its group), in completion
    # tokens, whatever the prompt's length (ours, the paper's values are not public). 0: off.
    brevity: float = 0.1

    def check(self) -> None:
        def refuse(key: str, message: str):
            raise ConfigError(f"cadence.{key}: {message}")

        if not isinstance(self.teacher, str) or not self.teacher or self.teacher == "policy":
            refuse("teacher", f"must name a model other than the policy, not {self.teacher!r}")
        if self.absent not in ABSENT:
            refuse("absent", f"must be one of {', '.join(ABSENT)}, not '{self.absent}'")
        for key in ("drift_scale", "boost", "partial_credit", "brevity"):
            if getattr(self, key) < 0:
                refuse(key, f"must be non-negative, not {getattr(self, key)}")
        for key in ("weight_clip", "entropy_ref", "tolerance", "coverage_tau"):
            if getattr(self, key) <= 0:
                refuse(key, f"must be positive, not {getattr(self, key)}")
        for key in ("beta_start", "beta_end", "gate", "alpha_max"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                refuse(key, f"must lie in [0, 1], not {getattr(self, key)}")
        if self.beta_end > self.beta_start:
            refuse("beta_end", f"must not exceed cadence.beta_start ({self.beta_start}), not {self.beta_end}")
        if self.gate >= 1.0:
            refuse("gate", f"must be below 1, not {self.gate}")
        if not 0.0 <= self.coverage_decay < 1.0:
            refuse("coverage_decay", f"must lie in [0, 1), not {self.coverage_decay}")
        for key in ("anneal_steps", "coverage_k", "rows_per_forward"):
            if getattr(self, key) < 1:
                refuse(key, f"must be at least 1, not {getattr(self, key)}")
        if self.temperature is not None and self.temperature <= 0:
            refuse("temperature", f"must be positive, not {self.temperature}")
