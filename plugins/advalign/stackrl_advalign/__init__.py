"""The stackrl plugin `advalign`: Advantage Alignment's opponent-shaping advantages over paired seats."""

from stackrl_advalign.config import AdvalignConfig
from stackrl_advalign.plugin import Advalign

__all__ = ["Advalign", "AdvalignConfig"]
