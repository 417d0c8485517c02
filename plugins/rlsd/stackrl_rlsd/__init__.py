"""RLSD: RLVR with self-distillation ("Self-Distilled RLVR", arXiv 2604.03128)."""

from stackrl_rlsd.plugin import Rlsd, RlsdConfig

__all__ = ["Rlsd", "RlsdConfig"]
