"""CSCR: tokens whose log-prob a claimed outcome moves most get less of the rollout's credit; the total stays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, TeacherSettings
from stackrl.blocks.tokensignals import SignalContext, TokenSignals, acted_on_tokens, inverse_sensitivity, reallocate

SENSITIVITIES = ("sum", "max")


@dataclass
class CscrConfig(TeacherSettings):
    # `teacher`, the scoring weights: the live policy, or the frozen reference (the LoRA-disabled base);
    # `temperature`, the softmax temperature of every score.
    section: ClassVar[str] = "cscr"
    # The two counterfactual contexts, templates over {prompt}, the dataset columns and the block's derived
    # fields. One asserts the rollout's outcome is correct, the other that it is not. The defaults are for a
    # model that reads a worked solution before the question (the built-in one): a solution reaching the rollout's
    # own answer, and one reaching another answer. A model that reads instructions takes a sentence instead (the
    # GPU recipe).
    correct_template: str = "{claimed_solution}\n\n{prompt}"
    incorrect_template: str = "{denied_solution}\n\n{prompt}"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"sensitivity": SENSITIVITIES}
    # Sensitivity of a token from its shifts d+ and d- (log-prob under the context minus the student's):
    # "sum" |d+| + |d-|, "max" max(|d+|, |d-|).
    sensitivity: str = "sum"
    # Weights max(floor, 1 / (1 + strength * sensitivity)), renormalised so each rollout keeps its credit and
    # sign. The paper finds moderate down-weighting best and strong modulation unstable: the floor keeps the most
    # sensitive token at least `floor` times the credit of an insensitive one (0: no floor).
    strength: float = 1.0
    floor: float = 0.5
    # A token counts as shifted, in the logged diagnostic, when both |d+| and |d-| exceed this (nats).
    shift_threshold: float = 0.1

    def check(self):
        if self.strength < 0:
            self.refuse("strength", f"must be non-negative, not {self.strength}")
        if not 0 <= self.floor <= 1:
            self.refuse("floor", f"must be in [0, 1], not {self.floor}")
        if self.shift_threshold < 0:
            self.refuse("shift_threshold", f"must be non-negative (nats), not {self.shift_threshold}")


def sensitivity(shift_correct: torch.Tensor, shift_incorrect: torch.Tensor, kind: str) -> torch.Tensor:
    """How much the two claimed outcomes move each token, whatever the direction."""
    if kind == "sum":
        return shift_correct.abs() + shift_incorrect.abs()
    return torch.maximum(shift_correct.abs(), shift_incorrect.abs())


class Cscr(SelfTeacherPlugin):
    """``A_t = A * w_t * T / sum w``, ``w_t = max(floor, 1 / (1 + strength * s_t))``, ``s_t`` the counterfactual
    sensitivity."""

    Config = CscrConfig
    activity = "completion tokens had their advantage reweighted"
    templates = ("correct_template", "incorrect_template")

    def shifts(self, ctx) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(d+, d-, mask)``: each token's log-prob under each claimed outcome minus the student's."""
        signals = TokenSignals.of(ctx)
        options = dict(model=self.config.teacher, temperature=self.config.temperature)
        correct = SignalContext(f"{self.name}.correct_template", self.config.correct_template)
        incorrect = SignalContext(f"{self.name}.incorrect_template", self.config.incorrect_template)
        return signals.gap(correct, **options), signals.gap(incorrect, **options), signals.mask

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        up, down, mask = self.shifts(ctx)
        threshold = self.config.shift_threshold
        shifted = (up.abs() > threshold) & (down.abs() > threshold) & mask.bool()
        if shifted.any():  # the paper's diagnostic: most shifted tokens move the same way under both claims
            ctx.log("same_direction", (up.sign() == down.sign())[shifted].float().mean().item())
        weights = inverse_sensitivity(sensitivity(up, down, self.config.sensitivity), self.config.strength).clamp_min(
            self.config.floor
        )
        return acted_on_tokens(ctx, advantages, reallocate(advantages, weights * mask, mask), mask)
