"""The stackrl plugin `sws`: Self-aware Weakness-driven problem Synthesis."""

from stackrl_sws.plugin import Sws, SwsConfig

__all__ = ["Sws", "SwsConfig"]
