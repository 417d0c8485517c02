"""Advantage Alignment: opponent shaping for agents that play each other, as an advantage estimator over the
environment runner's paired seats.

Paper: Duque, Aghajohari, Cooijmans et al., "Advantage Alignment Algorithms" (arXiv 2406.14662) and its LLM version
(Trust-and-Split; seed-000 catalogue line 189). Code followed: dereckpiche/llm_negotiation
(mllm/training/credit_methods.py).
"""

from __future__ import annotations

import stackrl
from stackrl.blocks.env import EPISODE_COLUMN, SEAT_COLUMN, TURN_REWARDS_COLUMN
from stackrl.blocks.env.layout import ACTION
from stackrl.blocks.roles import broadcast_segments
from stackrl.blocks.turns import SEGMENTS_COLUMN
from stackrl_advalign.alignment import aligned, opponents, seat_advantages
from stackrl_advalign.config import AdvalignConfig

COLUMNS = (TURN_REWARDS_COLUMN, SEAT_COLUMN, EPISODE_COLUMN, SEGMENTS_COLUMN)


class Advalign(stackrl.Plugin):
    """Each action's advantage is its seat's turn advantage plus ``beta`` times the seat's discounted past
    advantages times the opponent's advantage at the same turn: an action gains where both seats' interaction has
    gone well so far and the opponent gains now, so the policy learns to raise what helps the other seat too.
    Per token: each action's credit on its tokens, observations 0. Rows without an opponent row keep their own
    turn advantages; a rollout without the runner's columns keeps GRPO's."""

    Config = AdvalignConfig
    activity = "rows had an opponent row in their episode whose advantages shaped theirs"

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout, config = ctx.rollout, self.config
        if any(column not in rollout.columns for column in COLUMNS):
            ctx.acted(0, of=len(rollout), hint="advalign needs the env plugin's rollout (plugins: [env, advalign])")
            return None
        seats, episodes = rollout.columns[SEAT_COLUMN], rollout.columns[EPISODE_COLUMN]
        rewards = [[r / config.reward_scale for r in row] for row in rollout.columns[TURN_REWARDS_COLUMN]]
        own = seat_advantages(rewards, seats, ctx.group_size, discount=config.discount, per_seat=config.per_seat)
        partner = opponents(seats, episodes)
        credits = [
            aligned(own[row], None if other is None else own[other], beta=config.beta, gamma=config.gamma,
                    include_current=config.include_current)
            for row, other in enumerate(partner)
        ]
        spans = [[(s.start, s.end) for s in row if s.kind == ACTION] for row in rollout.columns[SEGMENTS_COLUMN]]
        shaping = [c - a for row, values in enumerate(credits) for c, a in zip(values, own[row])]
        if shaping:
            ctx.log("shaping_abs", sum(abs(s) for s in shaping) / len(shaping))
            ctx.log("own_abs", sum(abs(a) for row in own for a in row) / len(shaping))
        ctx.acted(sum(other is not None for other in partner), of=len(rollout),
                  hint="advalign shapes only rows whose episode has a second live seat (env.seats: [policy, policy])")
        return broadcast_segments(credits, spans, rollout.completion_mask().size(1))
