"""The stackrl plugin `mrsearch`."""

from stackrl_mrsearch.attempts import Attempts
from stackrl_mrsearch.plugin import Mrsearch, MrsearchConfig

__all__ = ["Attempts", "Mrsearch", "MrsearchConfig"]
