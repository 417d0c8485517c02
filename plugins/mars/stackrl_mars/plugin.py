"""MARS in the advantage stage of the environment runner's rollouts."""

from __future__ import annotations

import stackrl
from stackrl.blocks.env import SEAT_COLUMN, TURN_REWARDS_COLUMN
from stackrl.blocks.turns import broadcast_segments, segments_of
from stackrl.errors import PluginError
from stackrl_mars.advantages import turn_advantages
from stackrl_mars.config import MarsConfig


class Mars(stackrl.Plugin):
    """Replaces GRPO's estimator on episodes played by the ``env`` plugin: each action of a row gets the
    discounted return of its seat from that turn on, normalised against every turn its seat played in the batch
    (player 0's turns with player 0's, player 1's with player 1's), over the action's tokens; observations 0."""

    Config = MarsConfig
    activity = "rows had a turn-level advantage (an episode's seat that took at least one action)"

    def check_run(self, run):
        if "env" not in run.components:
            return [f"{self.name}: the run has no env plugin, so no episodes: mars leaves GRPO's advantages as they are"]
        return None

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout = ctx.rollout
        if TURN_REWARDS_COLUMN not in rollout.columns:  # another plugin generated the rollout: no episodes
            ctx.acted(0, of=len(rollout), hint="the rollout has no episodes: put env in plugins (and let it generate)")
            return None
        turn_rewards, seats = rollout.columns[TURN_REWARDS_COLUMN], rollout.columns[SEAT_COLUMN]
        segments = segments_of(rollout, plugin=self.name)
        for row, (rewards, spans) in enumerate(zip(turn_rewards, segments, strict=True)):
            if len(rewards) != len(spans):
                raise PluginError(f"{self.name}: row {row} has {len(spans)} actions but {len(rewards)} turn rewards")
        values = turn_advantages(turn_rewards, seats, self.config.gamma, self.config.scale)
        ctx.acted(sum(len(r) > 0 for r in turn_rewards), of=len(rollout),
                  hint="no seat took an action: check env.max_tokens and env.turn_tokens")
        spans = [[(s.start, s.end) for s in row] for row in segments]
        return broadcast_segments(values, spans, rollout.completion_mask().size(1))
