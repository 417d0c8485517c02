"""TRLOO: the advantage stage's estimator, GRPO's group baseline with the completion itself left out."""

from __future__ import annotations

import stackrl
from stackrl_trloo.baseline import leave_one_out
from stackrl_trloo.config import TrlooConfig


class Trloo(stackrl.Plugin):
    """Each completion's advantage is its total reward minus the mean total reward of the other scored
    completions of its group: a baseline independent of the completion, so the policy gradient is unbiased."""

    Config = TrlooConfig
    activity = "completions had a leave-one-out baseline (another scored completion in their group)"

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout = ctx.rollout
        # A row no component scored has no reward to compare: NaN keeps it out of every baseline.
        rewards = ctx.scored_reward
        scored = ~rewards.isnan()
        compared = (scored.view(-1, ctx.group_size).sum(1, keepdim=True) > 1) & scored.view(-1, ctx.group_size)
        ctx.acted(int(compared.sum()), of=len(rollout))
        return leave_one_out(rewards, ctx.group_size, lone=self.config.lone)
