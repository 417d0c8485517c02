"""TurnSight: the outcome advantage of each tool-using turn scaled, never flipped, by how much the same model, shown
what the tools returned after the turn, would rather have taken it, where several look-ahead horizons agree on it.

Paper: "TurnSight: Turn-Level Hindsight Self-Distillation for Tool-Integrated Reasoning" (catalogue 001:123).
Code followed: none reachable (github.com/quchangle1/TurnSight, named in the abstract, is not in the index; README).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import stackrl
from stackrl.blocks.env import ACTION
from stackrl.blocks.tokensignals import acted_on_tokens, per_token
from stackrl.blocks.turns import SEGMENTS_COLUMN
from stackrl_turnsight.hindsight import (
    agreed, group_normalized, hindsight, observations, scale, teacher_context, view_signal,
)

RESULTS = "{results}"


@dataclass
class TurnsightConfig:
    """The ``turnsight:`` section."""

    # Look-ahead horizons of the hindsight views: horizon h shows the tool results that followed the turn and the
    # next h - 1 turns. A turn is kept only where every view moves the action's log-prob the same way.
    horizons: list[int] = field(default_factory=lambda: [1, 2, 3])
    # How the hindsight is shown to the teacher, between the prompt and the row's tokens up to the turn; {results}
    # is the observations' own tokens, as the policy saw them.
    template: str = "Results to come:{results}"
    # The scale 1 + alpha * sign(A) * z on a kept turn's advantage, z its signal normalised over the group's turns.
    alpha: float = 0.5
    # ... clipped to [1 - band, 1 + band]; band < 1 keeps every advantage's sign.
    band: float = 0.5

    def __post_init__(self):
        horizons = list(self.horizons)
        if not horizons or any(int(h) != h or h < 1 for h in horizons) or len(set(horizons)) != len(horizons):
            raise stackrl.ConfigError(f"turnsight.horizons: must be distinct positive integers, not {horizons}")
        if self.template.count(RESULTS) != 1:
            raise stackrl.ConfigError(f"turnsight.template: must hold {RESULTS} once, not '{self.template}'")
        if self.alpha < 0:
            raise stackrl.ConfigError(f"turnsight.alpha: must be non-negative, not {self.alpha}")
        if not 0 < self.band < 1:
            raise stackrl.ConfigError(f"turnsight.band: must be in (0, 1) so no advantage changes sign, not {self.band}")


class Turnsight(stackrl.Plugin):
    """Reshapes the advantages of the env runner's rows: each action turn followed by tool results is scored by the
    policy with and without those results in its context, at each horizon; a turn whose views agree in direction
    gets its mean gap, z-scored over the group's kept turns, as a sign-keeping scale on its tokens' advantages."""

    Config = TurnsightConfig
    activity = "action tokens had their advantage scaled by their turn's agreed hindsight signal"

    def __init__(self, config=None):
        super().__init__(config)
        self._template: tuple[list[int], list[int]] | None = None

    def template_ids(self, tokenizer) -> tuple[list[int], list[int]]:
        """The template's text before and after {results}, as token ids."""
        if self._template is None:
            before, after = self.config.template.split(RESULTS)
            encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"] if text else []  # noqa: E731
            self._template = (encode(before), encode(after))
        return self._template

    def views(self, rollout, tokenizer) -> list[tuple[int, int, list[list[int]], list[int], list[int]]]:
        """Every scored turn: ``(row, turn, teacher contexts (one per horizon), student context, action ids)``.
        Turns with no result after them (a final answer) are left out."""
        before, after = self.template_ids(tokenizer)
        out = []
        for i, segments in enumerate(rollout.columns[SEGMENTS_COLUMN]):
            actions = [s for s in segments if s.kind == ACTION]
            ids, prompt = rollout.completion_ids[i], rollout.prompt_ids[i]
            shown = observations(ids, actions)
            for k, action in enumerate(actions):
                if not hindsight(shown, k, 1):
                    continue
                prefix = ids[: action.start]
                teachers = [teacher_context(prompt, before, hindsight(shown, k, h), after, prefix)
                            for h in self.config.horizons]
                out.append((i, k, teachers, [*prompt, *prefix], ids[action.start : action.end]))
        return out

    def signals(self, ctx, views) -> list[list[float]]:
        """Each view's signal, one list per scored turn (horizons in order), from one ``ctx.score`` over the
        distinct contexts."""
        jobs: dict[tuple, int] = {}
        for _, _, teachers, student, action in views:
            for context in (*teachers, student):
                jobs.setdefault((tuple(context), tuple(action)), len(jobs))
        keys = list(jobs)
        scores = ctx.score([list(c) for c, _ in keys], [list(a) for _, a in keys])
        logprobs = [scores.logprobs[j, : len(a)].double() for j, (_, a) in enumerate(keys)]
        out = []
        for _, _, teachers, student, action in views:
            own = logprobs[jobs[(tuple(student), tuple(action))]]
            out.append([view_signal(logprobs[jobs[(tuple(t), tuple(action))]], own) for t in teachers])
        return out

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        rollout = ctx.rollout
        mask = rollout.completion_mask()
        if SEGMENTS_COLUMN not in rollout.columns or rollout.loss_mask is None:
            ctx.acted(0, of=int(mask.sum()), hint="turnsight scales the env plugin's tool turns: put env in plugins")
            return None
        views = self.views(rollout, ctx.tokenizer)
        signals = self.signals(ctx, views) if views else []
        kept = [[None] * len(row) for row in rollout.columns[SEGMENTS_COLUMN]]
        for (i, k, *_), row in zip(views, signals):
            kept[i][k] = agreed(row)
        z = group_normalized(kept, ctx.group_size)
        width = advantages.size(1) if advantages.dim() == 2 else mask.size(1)
        mask = torch.nn.functional.pad(mask, (0, width - mask.size(1)))
        incoming = per_token(advantages, mask).float()
        reshaped = incoming.clone()
        for i, segments in enumerate(rollout.columns[SEGMENTS_COLUMN]):
            actions = [s for s in segments if s.kind == ACTION]
            for k, action in enumerate(actions):
                if kept[i][k] is not None:
                    span = incoming[i, action.start : action.end]
                    reshaped[i, action.start : action.end] = span * scale(z[i][k], span, self.config.alpha,
                                                                          self.config.band)
        agreeing = sum(v is not None for row in kept for v in row)
        ctx.log("hindsight_turns", len(views))
        if views:
            ctx.log("agreement", agreeing / len(views))
        loss_mask = torch.zeros_like(mask)
        for i, row in enumerate(rollout.loss_mask):
            loss_mask[i, : len(row)] = torch.tensor(row, dtype=mask.dtype)
        return acted_on_tokens(ctx, advantages, reshaped, loss_mask,
                               hint="no tool turn had hindsight views that agreed, or every advantage was 0")
