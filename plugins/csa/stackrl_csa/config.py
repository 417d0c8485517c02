"""Every setting of the CSA plugin. The paper's reward table and output format are not public (see the README):
the defaults are ours, each chosen so that the reward is exact and the best policy delegates exactly the problems
the model solves less often than ``threshold``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl.errors import ConfigError
from stackrl.rewards import OutcomeSettings

from stackrl_csa.decisions import DecisionTable

SOLVABILITY = ("group", "reference")


@dataclass
class CsaConfig(OutcomeSettings):
    # `metric` (the built-in outcome reward that judges an attempt) and `answer_column` come from OutcomeSettings.
    section: ClassVar[str] = "csa"
    # A completion that holds this phrase delegates; any other attempts. The paper's action word is DELEGATE.
    delegation: str = "DELEGATE"
    # The prompt the policy decides on: {prompt} and the data's columns; the place for an instruction saying how to
    # delegate. "{prompt}" leaves the prompts as they are.
    prompt_template: str = "{prompt}"
    # Text written as the last completion of every training group, in place of a sample (empty: none). For a policy
    # that never writes the phrase (the built-in models), so that each group compares a delegation with attempts.
    written_delegation: str = ""
    # The reward table (ours): an attempt by its answer, a delegation by its problem's solvability.
    attempt_right: float = 1.0
    attempt_wrong: float = 0.0
    delegate_solvable: float = 0.0
    delegate_unsolvable: float = 1.0
    # A problem is solvable when the model's pass rate on it is at least this.
    threshold: float = 0.5
    # Whose pass rate: "group", the policy's (the group's own attempts and `probes` more samples of the bare
    # prompt); "reference", `probes` samples of the reference model (the model before training) alone.
    solvability: str = "group"
    probes: int = 4

    def check(self) -> None:
        if not self.delegation:
            raise ConfigError(f"{self.section}.delegation: must be some text, not empty")
        if self.written_delegation and self.delegation not in self.written_delegation:
            raise ConfigError(f"{self.section}.written_delegation: must hold the delegation phrase "
                              f"{self.delegation!r}, or it would not count as a delegation")
        if self.solvability not in SOLVABILITY:
            raise ConfigError(f"{self.section}.solvability: must be one of {', '.join(SOLVABILITY)}, "
                              f"not {self.solvability!r}")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"{self.section}.threshold: must lie in (0, 1], not {self.threshold}")
        if self.probes < 0:
            raise ConfigError(f"{self.section}.probes: must be at least 0, not {self.probes}")
        if self.solvability == "reference" and self.probes == 0:
            raise ConfigError(f"{self.section}.probes: solvability 'reference' needs at least 1 probe")
        if self.attempt_right <= self.attempt_wrong:
            raise ConfigError(f"{self.section}.attempt_right: must exceed attempt_wrong "
                              f"({self.attempt_right} <= {self.attempt_wrong})")
        if self.delegate_unsolvable <= self.delegate_solvable:
            raise ConfigError(f"{self.section}.delegate_unsolvable: must exceed delegate_solvable "
                              f"({self.delegate_unsolvable} <= {self.delegate_solvable})")

    @property
    def table(self) -> DecisionTable:
        return DecisionTable(self.attempt_right, self.attempt_wrong, self.delegate_solvable, self.delegate_unsolvable)
