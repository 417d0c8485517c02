"""RLCSD: the policy shown a correct hint against the same policy shown a wrong one, token by token, beside GRPO."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.teacher import check_teacher_run, check_teacher_settings
from stackrl.tokensignals import SignalContext, TokenSignals, magnitude_weights, per_token, reallocate

MODES = ("additive", "magnitude")


@dataclass
class RlcsdConfig:
    # The correct hint and the wrong hint: templates over {prompt}, the dataset columns and the block's derived
    # fields. The defaults are the built-in task's layout: the worked solution, and the same solution reaching a
    # wrong answer (the rollout's own when it is wrong, else another problem's).
    positive_template: str = REFERENCE_TEMPLATE
    negative_template: str = "{wrong_solution}\n\n{prompt}"
    # The scoring weights: the live policy, or the frozen reference (the LoRA-disabled base).
    teacher: str = "policy"
    # "additive": A_t = A + coefficient * clamp(c_t, -clip, clip), the contrast c_t as a per-token reward beside
    # GRPO's (OPSD's sampled-token form with the contrast in place of the teacher-student gap); "magnitude":
    # A_t = A * w_t with RLSD's positive weights exp(sign(A) * clamp(c_t)), normalised so each rollout keeps its
    # credit.
    mode: str = "additive"
    coefficient: float = 0.1
    clip: float = 2.0
    # Softmax temperature of both scores; null: the run's sampling temperature.
    temperature: Optional[float] = None

    def __post_init__(self):
        check_teacher_settings("rlcsd", self)
        if self.mode not in MODES:
            raise ConfigError(f"rlcsd.mode: must be one of {', '.join(MODES)}, not '{self.mode}'")
        if self.coefficient < 0:
            raise ConfigError(f"rlcsd.coefficient: must be non-negative, not {self.coefficient}")
        if self.clip <= 0:
            raise ConfigError(f"rlcsd.clip: must be positive, not {self.clip}")


class Rlcsd(Plugin):
    """``c_t = log pi(y_t | x, correct hint) - log pi(y_t | x, wrong hint)`` added to (or weighting) GRPO's."""

    Config = RlcsdConfig

    def check_run(self, run):
        check_teacher_run(run, self, "positive_template", "negative_template")

    def hints(self) -> tuple[SignalContext, SignalContext]:
        """The correct and the wrong hint, as the contexts the tokens are scored under."""
        return (SignalContext(f"{self.name}.positive_template", self.config.positive_template),
                SignalContext(f"{self.name}.negative_template", self.config.negative_template))

    def contrast(self, ctx):
        """``(c, mask)``: the contrast of every sampled token (0 on a row without the hints: one without an
        answer), and the mask of real tokens."""
        options = dict(model=self.config.teacher, temperature=self.config.temperature)
        signals = TokenSignals.of(ctx)
        return signals.contrast(*self.hints(), **options), signals.mask

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        contrast, mask = self.contrast(ctx)
        hinted = TokenSignals.of(ctx).covered(*self.hints())
        if hinted.any():
            ctx.log("contrast_mean", (contrast.sum() / hinted.sum()).item())
        if self.config.mode == "magnitude":
            return reallocate(advantages, magnitude_weights(contrast, advantages, mask, self.config.clip), mask)
        bonus = self.config.coefficient * contrast.clamp(-self.config.clip, self.config.clip)
        return per_token(advantages, mask) + bonus * mask
