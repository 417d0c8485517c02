"""DASD: direction-adaptive self-distillation ("Tailoring Teaching to Aptitude", arXiv 2605.22263)."""

from stackrl_dasd.config import DasdConfig
from stackrl_dasd.plugin import Dasd, directional_credit, routed_divergence

__all__ = ["Dasd", "DasdConfig", "directional_credit", "routed_divergence"]
