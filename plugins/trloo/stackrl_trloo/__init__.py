"""TRLOO for stackrl: the leave-one-out group baseline of Dr. Kernel (arXiv 2602.05885)."""

from stackrl_trloo.baseline import leave_one_out
from stackrl_trloo.config import TrlooConfig
from stackrl_trloo.plugin import Trloo

__all__ = ["Trloo", "TrlooConfig", "leave_one_out"]
