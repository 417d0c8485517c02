"""The stackrl plugin `rftt`: Reinforced Functional Token Tuning."""

from stackrl_rftt.config import RfttConfig
from stackrl_rftt.plugin import Rftt

__all__ = ["Rftt", "RfttConfig"]
