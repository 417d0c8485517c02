"""The stackrl plugin `venus`."""

from stackrl_venus.plugin import Venus, VenusConfig

__all__ = ["Venus", "VenusConfig"]
