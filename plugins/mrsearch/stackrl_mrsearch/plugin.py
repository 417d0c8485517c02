"""MR-Search: in-context meta-RL for search agents. The policy makes several attempts at a question in one context,
a reflection after each carried into the next (:mod:`stackrl_mrsearch.attempts`, the environment the ``env``
plugin's runner plays), and each attempt's tokens get a dense relative advantage: the attempt's reward against the
same attempt of the group's other rows, summed over the later attempts (:mod:`stackrl_mrsearch.credit`).

Paper: "Meta-Reinforcement Learning with Self-Reflection for Agentic Search" (MR-Search), Xiao et al.; catalogue
000:95. Code followed: github.com/tengxiao1/MR-Search@34666c0 (README).
"""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.blocks.env import INFO_COLUMN, TURN_REWARDS_COLUMN
from stackrl.blocks.turns import SEGMENTS_COLUMN
from stackrl_mrsearch.credit import token_advantages


@dataclass
class MrsearchConfig:
    """The ``mrsearch:`` section (the attempts themselves are the environment's: ``env.kwargs``)."""

    # v_a = r_a + improve * (r_a - r_{a-1}): a bonus for improving on the attempt before (the authors'
    # improve_gamma: 0 in their training script, 2 their config's default). 0: each attempt's own reward.
    improve: float = 0.0
    # C_a = A_a + discount * C_{a+1}: how much of the later attempts' advantages an attempt's tokens carry (the
    # authors' reward_model.discount, 1). 0: each attempt its own advantage alone.
    discount: float = 1.0

    def __post_init__(self):
        if not self.improve >= 0.0:
            raise stackrl.ConfigError(f"mrsearch.improve: must be at least 0, not {self.improve}")
        if not 0.0 <= self.discount <= 1.0:
            raise stackrl.ConfigError(f"mrsearch.discount: must lie in [0, 1], not {self.discount}")


class Mrsearch(stackrl.Plugin):
    """Replaces GRPO's one advantage per row by per-attempt advantages: each attempt's reward less the mean of the
    group's other rows at the same attempt, summed over the row's later attempts, on every token of its actions."""

    Config = MrsearchConfig
    activity = "episode rows got attempt-level credit (an attempt whose reward differs from its group's same attempt)"

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout = ctx.rollout
        columns = rollout.columns
        if not all(c in columns for c in (TURN_REWARDS_COLUMN, INFO_COLUMN, SEGMENTS_COLUMN)):
            ctx.acted(0, of=len(rollout), hint="mrsearch credits the env plugin's episodes: put env in plugins, "
                      "with env.environment: stackrl_mrsearch:Attempts")
            return None
        advantages, rewards = token_advantages(
            columns[TURN_REWARDS_COLUMN], columns[INFO_COLUMN], columns[SEGMENTS_COLUMN], ctx.group_size,
            rollout.completion_mask().size(1), improve=self.config.improve, discount=self.config.discount,
        )
        reached = max((len(r) for r in rewards), default=0)
        ctx.log("attempts", sum(len(r) for r in rewards) / max(len(rewards), 1))
        for a in range(reached):
            scored = [r[a] for r in rewards if len(r) > a]
            ctx.log(f"accuracy@{a + 1}", sum(scored) / len(scored))
        ctx.acted(int((advantages != 0).any(1).sum()), of=len(rollout),
                  hint="an attempt is compared with the same attempt of the group's other rows: no row's attempt "
                  "differed from its group's (env.environment: stackrl_mrsearch:Attempts gives the attempts)")
        return advantages
