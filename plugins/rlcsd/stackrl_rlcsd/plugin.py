"""RLCSD: the policy shown a correct hint against the same policy shown wrong ones, token by token, beside GRPO."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, TeacherSettings, privileged_rows
from stackrl.blocks.tokensignals import SignalContext, TokenSignals, acted_on_tokens, magnitude_weights, per_token, reallocate
from stackrl.blocks.tokensignals.contexts import WRONG_SIBLINGS

MODES = ("residual", "additive", "magnitude")


@dataclass
class RlcsdConfig(TeacherSettings):
    # `teacher`, the scoring weights: the live policy, or the frozen reference (the LoRA-disabled base);
    # `temperature`, the softmax temperature of both scores.
    section: ClassVar[str] = "rlcsd"
    # The correct hint and the wrong hint: templates over {prompt}, the dataset columns and the block's derived
    # fields. The defaults are the authors' hints in the built-in task's layout: another correct rollout of the
    # row's group, and other wrong rollouts of the group (never the row's own); `{wrong_sibling}` stands for each of
    # up to `wrong_hints` of them, and the wrong hint's probability of a token is their mean.
    positive_template: str = "{correct_sibling}\n\n{prompt}"
    negative_template: str = "{wrong_sibling}\n\n{prompt}"
    wrong_hints: int = 4
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"mode": MODES}
    # "residual" (the authors'): r_t = scale * tanh(c_t / tau) on the tokens where |r_t| > select; there
    # A_t = A + r_t, kept on A's side of zero (0 where A = 0), and those tokens' loss is averaged apart from the
    # others' (at weight `selected_weight`); rows without both hints are left out of the loss. "additive":
    # A_t = A + coefficient * clamp(c_t, -clip, clip) on every token. "magnitude": RLSD's positive weights
    # exp(sign(A) * clamp(c_t, -clip, clip)), normalised so each rollout keeps its credit.
    mode: str = "residual"
    scale: float = 0.5
    tau: float = 0.02
    select: float = 0.02
    selected_weight: float = 1.0
    coefficient: float = 0.1
    clip: float = 2.0

    def check(self):
        if not 1 <= self.wrong_hints <= WRONG_SIBLINGS:
            self.refuse("wrong_hints", f"must be 1 to {WRONG_SIBLINGS}, not {self.wrong_hints}")
        for key in ("scale", "select", "selected_weight", "coefficient"):
            if getattr(self, key) < 0:
                self.refuse(key, f"must be non-negative, not {getattr(self, key)}")
        for key in ("tau", "clip"):
            if getattr(self, key) <= 0:
                self.refuse(key, f"must be positive, not {getattr(self, key)}")


def residual_advantages(advantages, contrast, mask, *, scale, tau, select, selected_weight):
    """The authors' form, as per-token advantages under a token-mean loss: ``A + scale * tanh(c / tau)`` on the
    selected tokens, clamped to ``A``'s side of zero; each part rescaled so the batch's token mean gives each its
    own mean (the selected ones times ``selected_weight``). Returns ``(advantages, selected)``."""
    base = per_token(advantages, mask)
    residual = scale * torch.tanh(contrast / tau)
    selected = (residual.abs() > select) & mask.bool()
    shifted = base + residual
    kept = torch.where(base > 0, shifted.clamp_min(0.0), torch.where(base < 0, shifted.clamp_max(0.0), 0.0))
    total, chosen = mask.sum(), selected.sum()
    apart = torch.where(selected, selected_weight * total / chosen.clamp_min(1), total / (total - chosen).clamp_min(1))
    return torch.where(selected, kept, base) * apart * mask, selected


class Rlcsd(SelfTeacherPlugin):
    """``c_t = log pi(y_t | x, correct hint) - log mean_k pi(y_t | x, wrong hint k)``, beside GRPO's advantage."""

    Config = RlcsdConfig
    activity = "completion tokens had their advantage reweighted"
    templates = ("positive_template", "negative_template")

    def hints(self) -> tuple[SignalContext, list[SignalContext]]:
        """The correct hint and the wrong ones, as the contexts the tokens are scored under."""
        positive = SignalContext(f"{self.name}.positive_template", self.config.positive_template)
        negative = SignalContext(f"{self.name}.negative_template", self.config.negative_template)
        if "{wrong_sibling}" not in negative.template:
            return positive, [negative]
        return positive, [negative.nth_wrong_sibling(k) for k in range(1, self.config.wrong_hints + 1)]

    def contrast(self, ctx):
        """``(c, hinted)``: the contrast of every sampled token, and the mask of the real tokens of the rows with
        both hints (c is 0 on the others)."""
        options = dict(model=self.config.teacher, temperature=self.config.temperature)
        signals = TokenSignals.of(ctx)
        positive, negatives = self.hints()
        wrong, count = signals.mixture_logprobs(negatives, **options)
        hinted = signals.covered(positive) * (count > 0).unsqueeze(1)
        return (signals.logprobs(positive, **options) - wrong) * hinted, hinted

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        contrast, hinted = self.contrast(ctx)
        mask = TokenSignals.of(ctx).mask
        if hinted.any():
            ctx.log("contrast_mean", (contrast.sum() / hinted.sum()).item())
        config = self.config
        if config.mode == "magnitude":
            reshaped = reallocate(advantages, magnitude_weights(contrast, advantages, mask, config.clip), mask)
        elif config.mode == "additive":
            bonus = config.coefficient * contrast.clamp(-config.clip, config.clip)
            reshaped = per_token(advantages, mask) + bonus * mask
        else:
            reshaped = self.residual(advantages, contrast, hinted, mask, ctx)
        return acted_on_tokens(ctx, advantages, reshaped, mask)

    def residual(self, advantages, contrast, hinted, mask, ctx):
        """The authors' form on the rows with an answer; those without both hints leave the loss."""
        config = self.config
        # A row with an answer but without both hints is dropped, as the authors drop it; a row without an answer
        # has no privileged signal at all and stays GRPO's, as under every method on the block.
        answered = torch.zeros(len(mask), dtype=torch.bool)
        answered[privileged_rows(ctx.rollout)] = True
        ctx.rollout.exclude_from_loss((answered & (hinted.sum(1) == 0)).nonzero().flatten().tolist())
        reshaped, selected = residual_advantages(
            advantages, contrast, hinted, scale=config.scale, tau=config.tau, select=config.select,
            selected_weight=config.selected_weight,
        )
        ctx.log("selected_share", (selected.sum() / hinted.sum().clamp_min(1)).item())
        return torch.where(answered.unsqueeze(1), reshaped, per_token(advantages, mask))
