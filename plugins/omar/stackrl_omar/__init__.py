"""The stackrl plugin `omar`."""

from stackrl_omar.plugin import Omar, OmarConfig

__all__ = ["Omar", "OmarConfig"]
