"""PMD: Procedural Memory Distillation, level 1 ("Procedural Memory Distillation: Online Reflection for
Self-Improving Language Models", arXiv 2607.01480)."""

from stackrl_pmd.config import PmdConfig
from stackrl_pmd.plugin import Pmd, memory_divergence

__all__ = ["Pmd", "PmdConfig", "memory_divergence"]
