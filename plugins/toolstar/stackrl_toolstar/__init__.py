"""The stackrl plugin `toolstar`."""

from stackrl_toolstar.config import ToolstarConfig
from stackrl_toolstar.plugin import Toolstar

__all__ = ["Toolstar", "ToolstarConfig"]
