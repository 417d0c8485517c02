"""R^3: Replay, Reflection, and Ranking Rewards for LLM Reinforcement Learning (arXiv 2601.19620): its replay and
ranking reward."""

from stackrl_r3.plugin import R3, R3Config

__all__ = ["R3", "R3Config"]
