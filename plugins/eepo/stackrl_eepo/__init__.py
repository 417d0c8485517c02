"""EEPO for stackrl: exploration-enhanced policy optimization by sample-then-forget rollouts (arXiv 2510.05837)."""

from stackrl_eepo.config import EepoConfig
from stackrl_eepo.plugin import Eepo

__all__ = ["Eepo", "EepoConfig"]
