"""AgentOPSD: the outcome advantage reweighted per turn by how far the privileged teacher's evidence revises a
success belief carried across the turns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

import torch

from stackrl import hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, TeacherSettings
from stackrl.blocks.tokensignals import (
    SignalContext, TokenSignals, acted_on_tokens, linear_decay, mixed, per_token, reweight,
)
from stackrl.blocks.turns import NewlineTokens, turn_spans
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl_agentopsd.belief import EVIDENCE, REVISIONS, beliefs, revisions, token_weights, turn_evidence, turn_scores

TURNS = ("auto", "lines")


@dataclass
class AgentOpsdConfig(TeacherSettings):
    """``teacher``: the live policy (the authors') or the frozen reference, shown ``teacher_template`` ({prompt}
    and the dataset columns; the authors' privileged context is retrieved skills, the built-in task's the worked
    solution before the question); ``temperature``: null is the run's sampling temperature.

    ``turns``: "auto", a multi-turn row's generated segments (stackrl.blocks.turns) and a single-turn row's lines;
    "lines", the lines always. ``evidence``: a turn's evidence is the "sum" (the authors') or "mean" of its tokens'
    gaps ``log pi_T - log pi_S``. ``prior``: the belief before the first turn, null for the row's group's mean
    total reward (the authors': GRPO's own baseline), or a number in (0, 1). ``decay``: how much of the evidence
    so far each turn carries on, ``c_k = decay * c_{k-1} + e_k`` (1, the authors': the Bayesian sum; 0: a turn's
    own evidence alone). ``revision``: "signed" (the paper's Eq. 6: a turn weighs more the further it moved the
    belief the way the outcome went) or "magnitude" (the further it moved it either way). ``band``: the
    multiplier ``1 + band * z`` is kept in ``[1 - band, 1 + band]`` (the authors' mult_band, 0.2); ``mix``: it is
    applied at that share, ``(1 - mix) + mix * m`` (the authors' mult_lambda, 0.5), falling linearly to 0 over
    ``mix_decay_steps`` steps (0: constant, the authors'). ``normalize``: rescale each row's weights to mean 1 so
    it keeps GRPO's total credit (the authors do not)."""

    section: ClassVar[str] = "agentopsd"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"turns": TURNS, "evidence": EVIDENCE, "revision": REVISIONS}
    teacher_template: str = REFERENCE_TEMPLATE
    turns: str = "auto"
    evidence: str = "sum"
    prior: Optional[float] = None
    decay: float = 1.0
    revision: str = "signed"
    band: float = 0.2
    mix: float = 0.5
    mix_decay_steps: int = 0
    normalize: bool = False

    def check(self):
        if self.prior is not None and not 0 < self.prior < 1:
            self.refuse("prior", f"must be in (0, 1) or null (the group's mean reward), not {self.prior}")
        if not 0 <= self.decay <= 1:
            self.refuse("decay", f"must be in [0, 1], not {self.decay}")
        if not 0 < self.band < 1:
            self.refuse("band", f"must be in (0, 1), not {self.band}")
        if not 0 <= self.mix <= 1:
            self.refuse("mix", f"must be in [0, 1], not {self.mix}")
        if self.mix_decay_steps < 0:
            self.refuse("mix_decay_steps", f"must be non-negative, not {self.mix_decay_steps}")


class AgentOpsd(SelfTeacherPlugin):
    """``A_t = A * ((1 - mix) + mix * m_k)`` on turn ``k``'s tokens, ``m_k`` from the standardized revision
    ``V_k - V_{k-1}`` of the belief ``V_k = sigmoid(logit(V_0) + sum_{j<=k} e_j)``, ``e_j`` turn ``j``'s summed gap."""

    Config = AgentOpsdConfig
    activity = "completion tokens had their advantage reweighted by their turn's belief revision"

    def __init__(self, config=None):
        super().__init__(config)
        self._is_newline: NewlineTokens | None = None

    def priors(self, ctx) -> list[float]:
        """Each row's belief before its first turn: the configured prior, or its group's mean total reward."""
        if self.config.prior is not None:
            return [self.config.prior] * len(ctx.rollout)
        groups = ctx.total_reward.float().view(-1, ctx.group_size).mean(1)
        return groups.repeat_interleave(ctx.group_size).tolist()

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        config = self.config
        signals = TokenSignals.of(ctx)
        teacher = SignalContext(f"{self.name}.teacher_template", config.teacher_template)
        gap = signals.gap(teacher, model=config.teacher, temperature=config.temperature)
        mask = signals.mask
        self._is_newline = self._is_newline or NewlineTokens(ctx.tokenizer)
        spans = turn_spans(ctx.rollout, self._is_newline, lines=config.turns == "lines")
        direction = per_token(advantages, mask)
        weights = torch.ones_like(direction)
        largest = []
        for i, (row_spans, prior) in enumerate(zip(spans, self.priors(ctx))):
            if not row_spans:
                continue
            evidence = turn_evidence(gap[i], mask[i], row_spans, config.evidence)
            revision = revisions(beliefs(evidence, prior, config.decay))
            largest.append(revision.abs().max().item())
            weights[i] = token_weights(turn_scores(revision, config.revision), row_spans, direction[i],
                                       config.revision, config.band)
        if largest:
            ctx.log("turns_per_row", sum(len(s) for s in spans) / len(spans))
            ctx.log("largest_revision", sum(largest) / len(largest))
        share = linear_decay(config.mix, config.mix_decay_steps, ctx.step)
        reshaped = reweight(advantages, mixed(weights, share, mask), mask, config.normalize)
        return acted_on_tokens(ctx, advantages, reshaped, mask)
