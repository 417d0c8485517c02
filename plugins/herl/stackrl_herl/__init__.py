"""HeRL (hindsight-experience-guided RL) as a stackrl plugin."""

from stackrl_herl.config import HerlConfig
from stackrl_herl.plugin import Herl

__all__ = ["Herl", "HerlConfig"]
