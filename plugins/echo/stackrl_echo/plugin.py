"""ECHO's update side: each completion token's advantage reweighted by its entropy and its (lack of) confidence,
and each completion's clip range set by its tail confidence, wider where the policy was less sure."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import stackrl
from stackrl.blocks.tokensignals import STUDENT, TokenSignals
from stackrl.blocks.tokensignals.modulators import per_token
from stackrl_echo.shaping import clip_epsilon, exploration_score, hybrid_advantages, tail_confidence


@dataclass
class EchoConfig:
    # The hybrid advantage A * (1 + mult_coeff * S_t) + add_coeff * (S_t - its group's mean), with the exploration
    # score S_t = clamp(alpha * z(entropy_t) + beta * z(1 - confidence_t), -s_max, s_max), z over the batch's
    # completion tokens (the authors' algorithm.hybrid_adv defaults).
    shaping: bool = True
    alpha: float = 1.0
    beta: float = 1.0
    s_max: float = 2.0
    mult_coeff: float = 0.1
    add_coeff: float = 0.0
    # A token's confidence: the mean probability of the policy's `confidence_topk` most likely next tokens (at the
    # sampling temperature, as its entropy).
    confidence_topk: int = 5
    # The adaptive clip: eps = eps_min + (eps_max - eps_min) * sigmoid(kappa * (1 - C_tail)) on both sides of each
    # completion's ratio, C_tail its mean confidence over its last `tail_window` tokens (0: all of them). It
    # replaces the range the config (or a clip_range plugin before this one) set.
    adaptive_clip: bool = True
    tail_window: int = 16
    eps_min: float = 0.05
    eps_max: float = 0.2
    kappa: float = 4.0

    def __post_init__(self):
        for key in ("alpha", "beta", "mult_coeff", "add_coeff", "kappa"):
            if getattr(self, key) < 0:
                raise stackrl.ConfigError(f"echo.{key}: must be at least 0, not {getattr(self, key)}")
        if self.s_max <= 0:
            raise stackrl.ConfigError(f"echo.s_max: must be positive, not {self.s_max}")
        if self.mult_coeff * self.s_max >= 1:
            raise stackrl.ConfigError(
                f"echo.mult_coeff: mult_coeff * s_max must stay below 1, or a token's advantage flips its sign "
                f"({self.mult_coeff} * {self.s_max})")
        if self.confidence_topk < 1:
            raise stackrl.ConfigError(f"echo.confidence_topk: must be at least 1, not {self.confidence_topk}")
        if self.tail_window < 0:
            raise stackrl.ConfigError(
                f"echo.tail_window: must be at least 0 (0: the whole completion), not {self.tail_window}")
        if not 0.0 <= self.eps_min <= self.eps_max <= 1.0:
            raise stackrl.ConfigError(
                f"echo.eps_min and echo.eps_max must satisfy 0 <= eps_min <= eps_max <= 1, "
                f"not [{self.eps_min}, {self.eps_max}]")
        if not (self.shaping or self.adaptive_clip):
            raise stackrl.ConfigError("echo.shaping: off with echo.adaptive_clip off too: the plugin would do nothing")


class Echo(stackrl.Plugin):
    """ECHO's policy update (arXiv 2602.02150): entropy-confidence hybrid advantages and confidence-adaptive clipping.
    Its pseudo-labels are the run's reward (TTRL's majority vote: stack serl, as the recipes do)."""

    Config = EchoConfig
    activity = "completions whose advantages or clip range it set from their entropy and confidence"

    def __init__(self, config=None):
        super().__init__(config)
        self._shaped_rows: set[int] = set()  # rows whose advantage the shaping changed, until clip_range reports

    def signals(self, ctx) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(entropy, confidence, mask)``, ``(N, T)``, of every completion token: one scoring forward per row,
        shared by both hooks (and any other plugin of the batch asking the same)."""
        signals = TokenSignals.of(ctx)
        k = self.config.confidence_topk
        mass = signals.topk_mass(STUDENT, k)  # the entropy comes from the same forward
        return signals.entropy(STUDENT), mass / k, signals.mask

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        self._shaped_rows = set()
        config = self.config
        if not (config.shaping and ctx.training):  # evaluation trains nothing: no scoring forward
            return None
        entropy, confidence, mask = self.signals(ctx)
        if mask.sum() < 2:  # no spread to whiten over
            return None
        score = exploration_score(entropy, confidence, mask, alpha=config.alpha, beta=config.beta, s_max=config.s_max)
        shaped = hybrid_advantages(advantages, score, mask, ctx.rollout.group_index,
                                   mult_coeff=config.mult_coeff, add_coeff=config.add_coeff)
        before = per_token(advantages, mask)
        changed = ((shaped - before).abs() > 1e-6 * (1 + before.abs())) & mask.bool()
        self._shaped_rows = set(changed.any(1).nonzero().flatten().tolist())
        ctx.log("tokens_reweighted", float(changed.sum() / mask.sum()))
        ctx.log("score_abs_mean", float((score.abs() * mask).sum() / mask.sum()))
        return shaped

    @stackrl.hookimpl
    def clip_range(self, clip, ctx):
        if not ctx.training:
            return None
        config, rows = self.config, len(ctx.rollout)
        acted = self._shaped_rows
        result = None
        if config.adaptive_clip:
            _, confidence, mask = self.signals(ctx)
            tail = tail_confidence(confidence, mask, config.tail_window)
            eps = clip_epsilon(tail, eps_min=config.eps_min, eps_max=config.eps_max, kappa=config.kappa)
            trained = mask.sum(1) > 0
            result = tuple(_rows(eps, trained, bound) for bound in clip)
            acted = acted | set(trained.nonzero().flatten().tolist())
            ctx.log("tail_confidence", float(tail[trained].mean()) if trained.any() else 0.0)
            ctx.log("clip_epsilon", float(eps[trained].mean()) if trained.any() else 0.0)
        ctx.acted(len(acted), of=rows, hint="every completion was empty, or every advantage 0 with echo.adaptive_clip off")
        self._shaped_rows = set()
        return result


def _rows(eps: torch.Tensor, rows: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """``bound`` with ``eps`` on ``rows`` (per row, or on every token of those rows if ``bound`` is per token)."""
    if bound.dim() == 1:
        return torch.where(rows, eps, bound)
    return torch.where(rows.unsqueeze(1), eps.unsqueeze(1).expand_as(bound), bound)
