"""OMAR (One Model, All Roles): one policy plays every seat of a multi-party episode (the ``env`` plugin's rows, one
a seat), and each row's credit is hierarchical: the seat's reward is split over its turns, then over each turn's
tokens (:mod:`stackrl_omar.credit`).

Paper: "One Model, All Roles: Multi-Turn, Multi-Agent Self-Play Reinforcement Learning for Conversational Social
Intelligence", Jiang et al., arXiv:2602.03109. Code followed: none public (README).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import stackrl
from stackrl.blocks.env import SEAT_COLUMN, TURN_REWARDS_COLUMN
from stackrl.blocks.turns import SEGMENTS_COLUMN
from stackrl_omar.credit import ALL, EACH, SEAT, SPLIT, turn_advantages


@dataclass
class OmarConfig:
    """The ``omar:`` section."""

    # Discount of a seat's later turn rewards in a turn's return (G_k = r_k + gamma * G_{k+1}); 1 credits a turn
    # with everything its seat got from it to the end.
    gamma: float = 1.0
    # Which rows' same turn a turn's return is compared with: "seat" (the same seat in the group's other episodes:
    # each role against itself) or "all" (every seat's same turn).
    baseline: str = SEAT
    # Token level: "split" shares a turn's advantage evenly over its tokens; "each" gives every token all of it.
    tokens: str = SPLIT
    # A reward component (a judge's: the paper scores each agent's social goal at the episode's end) whose value
    # for a row is added to the reward of the row's last turn, so the split credits the turns with it as well; it
    # is read unweighted (rewards.<name> weighs it in GRPO's total, which omar replaces). None: the env's alone.
    outcome_reward: Optional[str] = None

    def __post_init__(self):
        if not 0.0 <= self.gamma <= 1.0:
            raise stackrl.ConfigError(f"omar.gamma: must lie in [0, 1], not {self.gamma}")
        if self.baseline not in (SEAT, ALL):
            raise stackrl.ConfigError(f"omar.baseline: must be one of {SEAT}, {ALL}, not '{self.baseline}'")
        if self.tokens not in (SPLIT, EACH):
            raise stackrl.ConfigError(f"omar.tokens: must be one of {SPLIT}, {EACH}, not '{self.tokens}'")


class Omar(stackrl.Plugin):
    """Replaces GRPO's one advantage per row by per-token advantages: each turn of a seat gets its return's
    advantage against the same seat's same turn in the group's other episodes, shared over the turn's tokens."""

    Config = OmarConfig
    activity = "episode rows got turn-by-turn credit (a turn whose return differs from its slot's mean)"

    def needs_rewards(self):
        return {"outcome_reward": self.config.outcome_reward} if self.config.outcome_reward else {}

    def seat_rewards(self, rollout) -> list[list[float]]:
        """Each row's turn rewards, the outcome component's value (where it scored the row) added to the last."""
        rewards = [[float(r) for r in row] for row in rollout.columns[TURN_REWARDS_COLUMN]]
        if self.config.outcome_reward:
            for row, value in zip(rewards, rollout.rewards[self.config.outcome_reward].tolist()):
                if row and not math.isnan(value):
                    row[-1] += value
        return rewards

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout = ctx.rollout
        columns = rollout.columns
        if not all(c in columns for c in (TURN_REWARDS_COLUMN, SEAT_COLUMN, SEGMENTS_COLUMN)):
            ctx.acted(0, of=len(rollout), hint="omar credits the env plugin's episodes: put env in plugins")
            return None
        segments = columns[SEGMENTS_COLUMN]
        advantages = turn_advantages(
            self.seat_rewards(rollout), columns[SEAT_COLUMN], segments, ctx.group_size,
            rollout.completion_mask().size(1), gamma=self.config.gamma, baseline=self.config.baseline,
            tokens=self.config.tokens,
        )
        turns = [len(row) for row in segments]
        ctx.log("turns", sum(turns) / len(turns))
        ctx.acted(int((advantages != 0).any(1).sum()), of=len(rollout),
                  hint="a turn is compared with the same seat's same turn in the group's other episodes: make "
                  "trainer.num_generations at least twice the live seats")
        return advantages
