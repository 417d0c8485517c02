"""OPSD: on-policy self-distillation ("Self-Distilled Reasoner: On-Policy Self-Distillation", arXiv 2601.18734)."""

from stackrl_opsd.config import OpsdConfig
from stackrl_opsd.plugin import Opsd, distillation_divergence

__all__ = ["Opsd", "OpsdConfig", "distillation_divergence"]
