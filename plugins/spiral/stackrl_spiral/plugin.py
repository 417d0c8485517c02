"""SPIRAL: self-play on zero-sum games, both seats the live policy, with role-conditioned advantage estimation.

Paper: "SPIRAL: Self-Play on Zero-Sum Games Incentivizes Reasoning via Multi-Agent Multi-Turn Reinforcement
Learning", Liu, Guertler, Yu et al., arXiv 2506.24119. Code followed: github.com/spiral-rl/spiral @ a02d0ed
(train_spiral.py, spiral/utils.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

import stackrl
from stackrl.blocks.env import RETURN_COLUMN, SEAT_COLUMN
from stackrl.errors import ConfigError
from stackrl_spiral.baselines import RoleBaselines


@dataclass
class SpiralConfig:
    """The ``spiral`` section. Self-play itself is the env section's: ``env.seats: [policy, policy]``."""

    # The baselines' moving-average decay: b <- decay * b + (1 - decay) * R (the authors' role_baseline_ema_gamma).
    decay: float = 0.95
    # The data column naming each row's game: a baseline per game and seat. Null, or a row without the column: one
    # game. The built-in `games` task has it (`game`).
    game_column: Optional[str] = "game"

    def __post_init__(self):
        if not 0.0 < self.decay < 1.0:
            raise ConfigError(f"spiral.decay: must lie strictly between 0 and 1, not {self.decay}")
        if self.game_column is not None and not self.game_column:
            raise ConfigError("spiral.game_column: give a column name, or null for one game")


class Spiral(stackrl.Plugin):
    """Replaces GRPO's group-relative advantage of each row of an episode by its seat's return less that game's and
    seat's moving baseline (RAE). Rows of a rollout the env runner did not play keep GRPO's advantages."""

    Config = SpiralConfig
    activity = "rows were env seats' episodes, each credited its return less its game's and seat's moving baseline"

    def __init__(self, config: SpiralConfig | None = None):
        super().__init__(config)
        self.baselines = RoleBaselines(self.config.decay)

    def check_run(self, run):
        notes = []
        if "env" not in run.components:
            notes.append("spiral: acts on the env plugin's episodes (plugins: [env, spiral]); without them it keeps "
                         "GRPO's advantages")
        column = self.config.game_column
        if column is not None and run.columns is not None and column not in run.columns:
            notes.append(f"spiral.game_column: the data has no column '{column}'; every row counts as one game")
        return notes or None

    def roles(self, rollout) -> list[tuple[str, int]]:
        column = self.config.game_column
        games = rollout.columns.get(column) if column is not None else None
        games = games if games is not None else [None] * len(rollout)
        return [("" if game is None else str(game), int(seat)) for game, seat in zip(games, rollout.columns[SEAT_COLUMN])]

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout = ctx.rollout
        if RETURN_COLUMN not in rollout.columns or SEAT_COLUMN not in rollout.columns:
            ctx.acted(0, of=len(rollout), hint="no env episodes in the rollout: stack spiral on env (plugins: [env, "
                      "spiral]) and let env generate (exclusive.generate_rollout: env)")
            return None
        roles = self.roles(rollout)
        # The return credited is the row's total reward: its seat's env return weighted by rewards.env (the authors'
        # reward_scaling), plus any other reward component the run stacks.
        # TRL's evaluation reads the same advantages but leaves the baselines to the training episodes.
        advantages = self.baselines.advantages(ctx.total_reward.tolist(), roles, update=ctx.training)
        ctx.acted(len(rollout), of=len(rollout))
        for game, seat in sorted(set(roles)):
            ctx.log(f"baseline/{game or 'game'}/seat{seat}", self.baselines.baseline((game, seat)))
        return torch.tensor(advantages, dtype=torch.float32)

    @stackrl.hookimpl
    def state_dict(self):
        return {"baselines": self.baselines.state_dict()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.baselines.load_state_dict(state["baselines"])
