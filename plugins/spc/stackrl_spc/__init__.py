"""SPC: Evolving Self-Play Critic via Adversarial Games for LLM Reasoning (arXiv 2504.19162)."""

from stackrl_spc.config import SpcConfig
from stackrl_spc.game import critic_reward, sneaky_reward, valid_corruption
from stackrl_spc.plugin import Spc

__all__ = ["Spc", "SpcConfig", "critic_reward", "sneaky_reward", "valid_corruption"]
