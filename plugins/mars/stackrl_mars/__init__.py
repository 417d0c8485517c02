"""MARS: turn-level advantages normalised per agent, for self-play in games ("MARS: Reinforcing Multi-Agent
Reasoning of LLMs through Self-Play in Strategic Games", arXiv 2510.15414)."""

from stackrl_mars.advantages import seat_normalised, turn_advantages
from stackrl_mars.config import MarsConfig
from stackrl_mars.plugin import Mars

__all__ = ["Mars", "MarsConfig", "seat_normalised", "turn_advantages"]
