"""GTPO: Group Turn Policy Optimization for multi-turn tool-integrated reasoning, as an advantage estimator over
the environment runner's episodes.

Paper: Ding, Le, Han, Ruan, Jin, Kumar, Wang, Deoras, "Empowering Multi-Turn Tool-Integrated Reasoning with Group
Turn Policy Optimization" (arXiv 2511.14846; seed-001 catalogue line 211). Code followed: none public.
"""

from __future__ import annotations

import stackrl
from stackrl.blocks.env import TURN_REWARDS_COLUMN
from stackrl.blocks.env.layout import ACTION
from stackrl.blocks.turns import SEGMENTS_COLUMN, segment_advantages
from stackrl_gtpo.config import GtpoConfig
from stackrl_gtpo.returns import returns, shaped, shaping, turn_rewards


class Gtpo(stackrl.Plugin):
    """Each action's advantage is its turn's discounted return, normalised against the same turn of the group's
    other rows (mean and standard deviation, GRPO's +1e-4); a turn's reward is what the environment paid it, the
    last turn's the row's outcome, and a failed row's outcome is raised by its code's similarity to the group's
    successful rows' code. Observations get 0; a rollout without the runner's columns keeps GRPO's."""

    Config = GtpoConfig
    activity = "rows had several turns or a shaped outcome, so their credit differs from GRPO's"

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout, config = ctx.rollout, self.config
        if TURN_REWARDS_COLUMN not in rollout.columns or SEGMENTS_COLUMN not in rollout.columns:
            ctx.acted(0, of=len(rollout), hint="gtpo needs the env plugin's rollout (plugins: [env, gtpo])")
            return None
        actions = [[s for s in row if s.kind == ACTION] for row in rollout.columns[SEGMENTS_COLUMN]]
        totals = [float(t) for t in ctx.total_reward.tolist()]
        codes = ["\n".join(s.text for s in row) for row in actions]
        terms = shaping(totals, codes, ctx.group_size, success=config.success, weight=config.shaping_weight)
        rewards = shaped(turn_rewards(rollout.columns[TURN_REWARDS_COLUMN], totals), terms)
        values = returns(rewards, config.gamma)
        for row, (segments, value) in enumerate(zip(actions, values)):
            if len(segments) != len(value):
                raise stackrl.PluginError(f"gtpo: row {row} has {len(segments)} actions but {len(value)} turn rewards")
        advantages = segment_advantages(values, actions, ctx.group_size, rollout.completion_mask().size(1))
        failed = [t for t, total in zip(terms, totals) if total < config.success]
        ctx.log("turns", sum(len(row) for row in actions) / len(actions))
        ctx.log("success", sum(total >= config.success for total in totals) / len(totals))
        if failed:
            ctx.log("shaping", sum(failed) / len(failed))
        ctx.acted(sum(len(row) > 1 or term > 0 for row, term in zip(actions, terms)), of=len(rollout),
                  hint="gtpo differs from GRPO on episodes of several turns (env.max_turns) or failed rows in a "
                       "group with a success (gtpo.shaping_weight)")
        return advantages
