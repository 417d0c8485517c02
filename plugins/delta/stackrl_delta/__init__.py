"""The stackrl plugin `delta`."""

from stackrl_delta.plugin import Delta, DeltaConfig

__all__ = ["Delta", "DeltaConfig"]
