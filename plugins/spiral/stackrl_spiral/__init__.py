"""SPIRAL: self-play on zero-sum games with role-conditioned advantage estimation ("SPIRAL: Self-Play on Zero-Sum
Games Incentivizes Reasoning via Multi-Agent Multi-Turn Reinforcement Learning", arXiv 2506.24119)."""

from stackrl_spiral.baselines import RoleBaselines
from stackrl_spiral.plugin import Spiral, SpiralConfig

__all__ = ["RoleBaselines", "Spiral", "SpiralConfig"]
