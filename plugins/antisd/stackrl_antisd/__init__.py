"""AntiSD: anti-self-distillation ("Anti-Self-Distillation for Reasoning RL via Pointwise Mutual Information",
arXiv 2605.11609)."""

from stackrl_antisd.config import AntisdConfig
from stackrl_antisd.plugin import Antisd

__all__ = ["Antisd", "AntisdConfig"]
