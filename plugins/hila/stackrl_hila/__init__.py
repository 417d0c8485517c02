"""HILA for stackrl: a cost-aware reward on solving or deferring to an expert, and supervised phases on the expert's
solutions of the deferred problems (Dual-Loop Policy Optimization, arXiv 2603.07972)."""

from stackrl_hila.config import HilaConfig
from stackrl_hila.plugin import Hila

__all__ = ["Hila", "HilaConfig"]
