"""LLMs are Greedy Agents: Effects of RL Fine-tuning on Decision-Making Abilities (Schmied et al., arXiv
2504.16078): RL fine-tuning in the environment runner with the paper's reward shaping (a bonus for an action not yet
tried in the episode, a penalty for an invalid action) and its bandit figures (cumulative regret, optimal-arm share,
action coverage)."""

from stackrl_dmcot.plugin import Dmcot, DmcotConfig

__all__ = ["Dmcot", "DmcotConfig"]
