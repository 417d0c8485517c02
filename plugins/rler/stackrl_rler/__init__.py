"""RLER as a stackrl plugin: an ensembled label-free reward with disagreement-aware group selection."""

from stackrl_rler.plugin import Rler, RlerConfig

__all__ = ["Rler", "RlerConfig"]
