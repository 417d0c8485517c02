"""RLCSD: reinforcement learning with contrastive on-policy self-distillation (arXiv 2606.11709)."""

from stackrl_rlcsd.plugin import Rlcsd, RlcsdConfig

__all__ = ["Rlcsd", "RlcsdConfig"]
