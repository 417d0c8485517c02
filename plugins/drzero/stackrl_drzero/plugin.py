"""Dr. Zero's HRPO (hop-grouped relative policy optimization): the advantage stage's estimator, a baseline shared by
the structurally similar questions of the batch. Paper: Dr. Zero: Self-Evolving Search Agents without Training Data,
Yue et al., arXiv 2601.07055. Code followed: facebookresearch/drzero@0591d53 (verl's grpo_batch estimator)."""

from __future__ import annotations

import stackrl
from stackrl_drzero.baseline import cluster_advantages, pooled_rows
from stackrl_drzero.clusters import cluster_keys
from stackrl_drzero.config import DrzeroConfig


class Drzero(stackrl.Plugin):
    """Each completion's advantage is its total reward standardised by the mean and spread of the rewards of every
    completion of the batch whose question has the same structure (hop count: here the built-in task's category,
    step count or operator skeleton), rather than of its own prompt's group: one or two samples a question suffice."""

    Config = DrzeroConfig
    activity = "completions were baselined on other questions of their structure (a cluster spanning prompts)"

    def check_run(self, run):
        if self.config.key == "column":
            run.need_column("drzero.column", self.config.column, "whose values cluster the questions")

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        rollout = ctx.rollout
        rewards = ctx.scored_reward  # NaN on rows no component scored: they stay out of every cluster
        scored = ~rewards.isnan()
        keys = cluster_keys(rollout, self.config.key, self.config.column)
        pooled = pooled_rows(keys, scored, rollout.group_size)
        ctx.acted(int(pooled.sum()), of=len(rollout))
        ctx.log("clusters", float(len({k for k, s in zip(keys, scored) if s})))
        return cluster_advantages(rewards, keys, scale_by_std=self.config.scale_by_std, epsilon=self.config.epsilon)
