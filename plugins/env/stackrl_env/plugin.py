"""``env``: runs the configured environment as the rollout (:class:`stackrl.blocks.env.Runner`) and rewards each
row with its seat's return."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.blocks.env import RETURN_COLUMN, EnvSettings, Runner
from stackrl.errors import ConfigError
from stackrl.hookspecs import hookimpl


@dataclass
class EnvConfig(EnvSettings):
    """The ``env`` section: :class:`stackrl.blocks.env.EnvSettings`."""


class Env(stackrl.Plugin):
    """Each batch is played as episodes in the environment; the reward component ``env`` is each seat's return."""

    Config = EnvConfig
    activity = "episodes ended by the environment (not a turn cap, token budget or failure)"

    def __init__(self, config: EnvConfig | None = None):
        super().__init__(config)
        self.runner = Runner(self.config)

    def check_run(self, run):
        seats = len(self.runner.live)
        if run.group_size % seats:
            raise ConfigError(
                f"env.seats: the live policy plays {seats} seats of each episode, a row each; trainer.num_generations "
                f"({run.group_size}) must be a multiple of {seats}"
            )

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        return self.runner.run(list(prompts), ctx)

    @hookimpl
    def reward(self, ctx):
        returns = ctx.rollout.columns.get(RETURN_COLUMN)
        if returns is None:  # another plugin generated the rollout (exclusive.generate_rollout): no episode to score
            return [None] * len(ctx.rollout)
        return [float(v) for v in returns]
