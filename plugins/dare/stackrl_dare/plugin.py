"""The DARE reward: each completion earns its answer's empirical frequency in its group, rather than majority
vote's all-or-nothing, so a right answer the group holds in minority still earns something.

The abstract names three parts without their forms; the forms chosen here, each a setting:

- distribution reward: ``p(a) = count(a) / G``, the share of the group's ``G`` completions ending in answer ``a``;
- pruning: answers with ``p(a) < min_frequency`` are noise and earn 0 (also no bonus);
- exploration bonus: ``exploration_bonus`` added to every completion whose kept answer is not the majority answer.

A completion without an answer earns 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.answers import AnswerSettings, GroupAnswers, groups_of, read_answers


@dataclass
class DAREConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify.
    section: ClassVar[str] = "dare"
    min_frequency: float = 0.2  # pruned below this share of the group (G = 8: answers given once)
    exploration_bonus: float = 0.1  # added to kept answers other than the majority's

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.min_frequency <= 1.0:
            raise ConfigError(f"dare.min_frequency must lie in [0, 1], not {self.min_frequency}")
        if self.exploration_bonus < 0:
            raise ConfigError(f"dare.exploration_bonus must be 0 or more, not {self.exploration_bonus}")


def distribution_rewards(group: GroupAnswers, min_frequency: float, exploration_bonus: float) -> list[float]:
    """Each row's reward: its answer's frequency, 0 when pruned or unanswered, plus the bonus outside the majority."""
    frequencies, pruned = group.frequencies, group.rare(min_frequency)
    rewards = []
    for cluster in group.index:
        if cluster is None or cluster in pruned:
            rewards.append(0.0)
        else:
            bonus = exploration_bonus if cluster != group.majority else 0.0
            rewards.append(frequencies[cluster] + bonus)
    return rewards


class DARE(Plugin):
    """DARE (Du, Huang and Li, 2026, arXiv 2601.21804) on the reward hook."""

    Config = DAREConfig
    activity = "completions had an answer to count"

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        answers = read_answers(ctx, config, "dare")
        groups = groups_of(answers, rollout.group_size, config.math_verify)
        ctx.declare_pseudo_labels([group.majority_answer for group in groups for _ in range(rollout.group_size)])
        ctx.log("answered", sum(a is not None for a in answers) / len(rollout))
        ctx.log("entropy", sum(group.entropy for group in groups) / len(groups))
        ctx.log("pruned", sum(group.counts[k] for group in groups for k in group.rare(config.min_frequency)) / len(rollout))
        return [
            reward
            for group in groups
            for reward in distribution_rewards(group, config.min_frequency, config.exploration_bonus)
        ]
