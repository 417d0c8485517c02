"""The stackrl plugin `evolver`."""

from stackrl_evolver.plugin import Evolver, EvolverConfig

__all__ = ["Evolver", "EvolverConfig"]
