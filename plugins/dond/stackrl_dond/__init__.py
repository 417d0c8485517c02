"""DoND self-play for stackrl: rounds of filtered behaviour cloning on the policy's own negotiation games (arXiv 2406.18872)."""

from stackrl_dond.config import DondConfig
from stackrl_dond.plugin import Dond

__all__ = ["Dond", "DondConfig"]
