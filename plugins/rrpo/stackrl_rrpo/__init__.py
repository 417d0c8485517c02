"""RRPO/SRPO: credit assignment with resets ("Credit Assignment with Resets in Language Model Reasoning", arXiv
2605.25507)."""

from stackrl_rrpo.config import RrpoConfig
from stackrl_rrpo.plugin import Rrpo
from stackrl_rrpo.resets import first_wrong_line

__all__ = ["Rrpo", "RrpoConfig", "first_wrong_line"]
