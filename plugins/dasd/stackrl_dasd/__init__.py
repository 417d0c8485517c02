"""DASD: direction-adaptive self-distillation (catalogue 001:177; no arXiv id found)."""

from stackrl_dasd.config import DasdConfig
from stackrl_dasd.plugin import Dasd, routed_divergence

__all__ = ["Dasd", "DasdConfig", "routed_divergence"]
