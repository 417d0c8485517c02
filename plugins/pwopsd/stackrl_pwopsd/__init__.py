"""PW-OPSD: position-weighted on-policy self-distillation ("When Are Teacher Tokens Reliable?", arXiv 2605.21606)."""

from stackrl_pwopsd.config import PwOpsdConfig
from stackrl_pwopsd.plugin import PwOpsd, weighted_divergence

__all__ = ["PwOpsd", "PwOpsdConfig", "weighted_divergence"]
