"""SVR-R1: Bootstrapping Multi-modal Reasoning with Self-verification in Reinforcement Learning (arXiv 2607.10966)."""

from stackrl_svrr1.config import SvrR1Config
from stackrl_svrr1.plugin import SvrR1

__all__ = ["SvrR1", "SvrR1Config"]
