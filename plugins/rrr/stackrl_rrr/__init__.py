"""Reflect, Retry, Reward ("Reflect, Retry, Reward: Self-Improving LLMs via Reinforcement Learning", arXiv
2505.24726)."""

from stackrl_rrr.config import RrrConfig
from stackrl_rrr.plugin import Rrr

__all__ = ["Rrr", "RrrConfig"]
