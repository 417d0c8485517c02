"""The SeRL reward: 1 for a completion whose answer is its group's majority answer, else 0; and the online
difficulty filter, which trains only on groups whose mean reward lies in a band (too easy and too hard groups
carry no learning signal)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.answers import AnswerSettings, extractor_of, groups_of


@dataclass
class SeRLConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (auto), answer_regex, math_verify (true, as the authors' check).
    # The difficulty filter: a group whose mean reward lies outside [min_mean_reward, max_mean_reward] is kept
    # out of the policy loss in training (the authors' --reward_difficulty_bounds 0.2 0.8).
    difficulty_filter: bool = True
    min_mean_reward: float = 0.2
    max_mean_reward: float = 0.8

    def __post_init__(self):
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

    def __init__(self, config=None):
        super().__init__(config)
        self._extract = extractor_of(self.config, "serl")

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        answers = [self._extract(text) for text in rollout.completions]
        groups = groups_of(answers, rollout.group_size, config.math_verify)
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
