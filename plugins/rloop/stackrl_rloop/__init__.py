"""RLoop for stackrl: RL iterations, each ended by rejection-sampling fine-tuning of its start (arXiv 2511.04285)."""

from stackrl_rloop.config import RloopConfig
from stackrl_rloop.plugin import Rloop

__all__ = ["Rloop", "RloopConfig"]
