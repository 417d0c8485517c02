"""ReST-GRPO as a plugin: after each batch, the filter and the assembly of ReST's data, steering the prompt pool."""

from __future__ import annotations

import random

import torch

from stackrl import ConfigError, Plugin, PluginError, hookimpl

from stackrl_restgrpo.assembly import group_spread, partial_prompts
from stackrl_restgrpo.config import RestGrpoConfig


class RestGrpo(Plugin):
    """Online ReST-GRPO: a problem's first group in an iteration samples it; a group whose rewards barely spread
    leaves its problem out until the next iteration, and a kept problem whose best completion is right adds
    partial-solution problems (its question and the first lines of that completion), drawn once each."""

    Config = RestGrpoConfig
    activity = "groups had their problem left out (no reward spread) or extended by partial solutions"

    def __init__(self, config=None):
        super().__init__(config)
        self.left_out: set[int] = set()  # rows weighed 0 until the next iteration
        self.partials: set[int] = set()  # this iteration's partial-solution rows not yet drawn
        self.iteration_start = 0
        self.batches_seen = 0  # the pool's batch count at the last update: one update per generation batch

    def needs_rewards(self):
        return {"reward": self.config.reward}

    def check_run(self, run):
        if run.chat and self.config.partial_ratio > 0:
            raise ConfigError(
                "restgrpo.partial_ratio: partial solutions continue text prompts; set it to 0 for a chat run"
            )

    @hookimpl
    def train_begin(self, ctx):
        if ctx.pool is None:
            raise PluginError(
                "restgrpo needs the prompt pool, which this run lacks (its training data is not a map-style dataset)"
            )

    @hookimpl
    def post_step(self, ctx):
        # With steps_per_generation > 1 several optimizer steps share one rollout: it is counted once.
        if ctx.pool.batches == self.batches_seen or ctx.rollout is None:
            return
        self.batches_seen = ctx.pool.batches
        rollout, size = ctx.rollout, ctx.rollout.group_size
        rewards = rollout.rewards[self.config.reward]
        drawn = ctx.pool.last_batch
        spent, left_out, added = [], {}, []
        for group, row in enumerate(drawn):
            if row in self.partials:  # a partial solution is trained on once, in the iteration that made it
                spent.append(row)
                continue
            scores = rewards[group * size : (group + 1) * size]
            if group_spread(scores) < self.config.std_threshold:
                left_out[row] = 0.0
                continue
            best = int(torch.nan_to_num(scores, nan=-torch.inf).argmax())
            if scores[best] >= self.config.accept_threshold:
                rng = random.Random(f"restgrpo/{ctx.step}/{row}")
                prompts = partial_prompts(rollout.prompts[group * size], rollout.completions[group * size + best],
                                          self.config.partial_ratio, self.config.alpha, rng)
                added.append([{**ctx.pool.row(row), "prompt": prompt} for prompt in prompts])
        ctx.acted(len(left_out) + sum(1 for rows in added if rows), of=len(drawn))
        ctx.log("left_out", len(left_out))
        ctx.log("partials_added", sum(len(rows) for rows in added))
        if spent:
            ctx.pool.retire(spent)
            self.partials.difference_update(spent)
        if left_out:
            ctx.pool.set_row_weights(left_out)
            self.left_out.update(left_out)
        rows = [row for group in added for row in group]
        if rows:
            self.partials.update(ctx.pool.add_rows(rows))
        # A new iteration samples every problem again; it also begins early when nothing is left to draw.
        ended = ctx.step - self.iteration_start >= self.config.iteration_steps
        if ended or self.left_out >= set(ctx.pool.active_rows()):
            self._next_iteration(ctx)

    def _next_iteration(self, ctx) -> None:
        if self.left_out:
            ctx.pool.set_row_weights({row: 1.0 for row in self.left_out})
        if self.partials:
            ctx.pool.retire(sorted(self.partials))
        self.left_out.clear()
        self.partials.clear()
        self.iteration_start = ctx.step

    @hookimpl
    def state_dict(self):
        return {"left_out": sorted(self.left_out), "partials": sorted(self.partials),
                "iteration_start": self.iteration_start, "batches_seen": self.batches_seen}

    @hookimpl
    def load_state_dict(self, state):
        self.left_out = set(state["left_out"])
        self.partials = set(state["partials"])
        self.iteration_start = state["iteration_start"]
        self.batches_seen = state["batches_seen"]
