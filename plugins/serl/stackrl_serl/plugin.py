"""The SeRL reward: 1 for a completion whose answer is its group's majority answer, else 0; the online
difficulty filter, which trains only on groups whose mean reward lies in a band (too easy and too hard groups
carry no learning signal); and self-instruction, the policy writing new problems into the prompt pool, where a
written problem stays only if its first group's agreement lies in the same band."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from stackrl import ConfigError, Plugin, PluginError, hookimpl
from stackrl.answers import AnswerSettings, groups_of, read_answers
from stackrl.blocks.selfinstruct import SelfInstruct, SelfInstructSettings


@dataclass
class SeRLConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify (true, as the
    # authors' check).
    section: ClassVar[str] = "serl"
    # The difficulty filter: a group whose mean reward lies outside [min_mean_reward, max_mean_reward] is kept
    # out of the policy loss in training (the authors' --reward_difficulty_bounds 0.2 0.8).
    difficulty_filter: bool = True
    min_mean_reward: float = 0.2
    max_mean_reward: float = 0.8
    # Self-instruction (off until every_steps is set): the authors' rules are the block's defaults; a written
    # problem's first group decides whether it stays in the pool (inside the band) or retires.
    self_instruct: SelfInstructSettings = field(default_factory=SelfInstructSettings)
    # Whether the dataset's rows are still drawn while written problems are in the pool. The authors train on
    # written problems only (the dataset seeds the examples): their rows weigh 0 while a written row is active.
    train_on_dataset: bool = False
    # The authors' vote counts a completion without an answer as the empty answer, one prediction among the others:
    # when the unanswered rows outnumber every answer, they are the majority and score 1. Off: they score 0 and
    # never make the majority.
    unanswered_votes: bool = False

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.min_mean_reward <= self.max_mean_reward <= 1.0:
            raise ConfigError(
                f"serl.min_mean_reward and serl.max_mean_reward must satisfy 0 <= min <= max <= 1, "
                f"not [{self.min_mean_reward}, {self.max_mean_reward}]"
            )


def majority_rewards(in_majority: list[bool]) -> list[float]:
    """1.0 for each row whose answer is the group's majority answer, 0.0 for every other row."""
    return [float(agrees) for agrees in in_majority]


def outside_band(rewards: torch.Tensor, group_size: int, low: float, high: float) -> torch.Tensor:
    """``(groups,)`` bool: the groups whose mean reward is below ``low`` or above ``high`` (the band is closed)."""
    means = rewards.view(-1, group_size).mean(dim=1)
    return (means < low) | (means > high)


class SeRL(Plugin):
    """SeRL (Fang et al., 2025, arXiv 2505.20347) on the reward hook: majority vote and difficulty filter."""

    Config = SeRLConfig
    activity = "completions had an answer to vote with"

    def __init__(self, config=None):
        super().__init__(config)
        self.instruct = SelfInstruct(self.config.self_instruct, "serl")
        self.pending: set[int] = set()  # written rows whose first group has not been seen yet
        self.batches_seen = 0  # the pool's batch count at the last filter: one filter per generation batch
        self.dataset_muted = False

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        answers = read_answers(ctx, config, "serl")
        votes = [("" if a is None else a) for a in answers] if config.unanswered_votes else answers
        groups = groups_of(votes, rollout.group_size, config.math_verify)
        rewards = torch.tensor([r for group in groups for r in majority_rewards(group.in_majority())])
        ctx.declare_pseudo_labels([group.majority_answer for group in groups for _ in range(rollout.group_size)])
        if config.difficulty_filter and ctx.training:
            dropped = outside_band(rewards, rollout.group_size, config.min_mean_reward, config.max_mean_reward)
            rollout.exclude_from_loss(dropped[rollout.group_index].nonzero().flatten().tolist())
            ctx.log("filtered_groups", dropped.double().mean().item())
        ctx.log("answered", sum(a is not None for a in answers) / len(rollout))
        ctx.log("majority_share", sum(group.majority_share for group in groups) / len(groups))
        ctx.log("distinct_answers", sum(len(group.distinct) for group in groups) / len(groups))
        return rewards

    @hookimpl
    def post_step(self, ctx):
        if not self.config.self_instruct.every_steps:
            return
        if ctx.pool is None:
            raise PluginError("serl.self_instruct needs the prompt pool, which this run lacks (its training data is "
                              "not a map-style dataset)")
        if ctx.rollout is not None and ctx.pool.batches != self.batches_seen:
            self.batches_seen = ctx.pool.batches
            self._filter_written(ctx)
        if self.instruct.due(ctx.step):
            self.pending.update(self.instruct.round(ctx))
        if not self.config.train_on_dataset:
            self._mute_dataset(ctx)

    def _mute_dataset(self, ctx) -> None:
        """The dataset's rows weigh 0 while a written row can be drawn, 1 again when none is left."""
        active = ctx.pool.active_rows()
        mute = any(row in self.instruct.written for row in active)
        if mute != self.dataset_muted:
            ctx.pool.set_row_weights({row: 0.0 if mute else 1.0 for row in active if row not in self.instruct.written})
            self.dataset_muted = mute

    def _filter_written(self, ctx) -> None:
        """Each written row drawn for the first time: inside the band it stays and may be shown as an example,
        outside it retires (with the filter off, every one stays)."""
        config, rollout = self.config, ctx.rollout
        agreement = rollout.rewards[self.name].view(-1, rollout.group_size).mean(dim=1).tolist()
        kept, dropped = [], []
        for row, share in zip(ctx.pool.last_batch, agreement):
            if row not in self.pending:
                continue
            self.pending.discard(row)
            inside = config.min_mean_reward <= share <= config.max_mean_reward
            (kept if inside or not config.difficulty_filter else dropped).append(row)
        self.instruct.examples.extend(kept)
        if dropped:
            ctx.pool.retire(dropped)
        ctx.log("instruct/kept", len(kept))
        ctx.log("instruct/dropped", len(dropped))

    @hookimpl
    def state_dict(self):
        return {"instruct": self.instruct.state_dict(), "pending": sorted(self.pending),
                "batches_seen": self.batches_seen, "dataset_muted": self.dataset_muted}

    @hookimpl
    def load_state_dict(self, state):
        self.instruct.load_state_dict(state["instruct"])
        self.pending = set(state["pending"])
        self.batches_seen = state["batches_seen"]
        self.dataset_muted = state["dataset_muted"]
