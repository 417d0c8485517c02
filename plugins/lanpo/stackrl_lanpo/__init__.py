"""The stackrl plugin `lanpo`."""

from stackrl_lanpo.plugin import Lanpo, LanpoConfig

__all__ = ["Lanpo", "LanpoConfig"]
