"""OPD-Evolver ("OPD-Evolver: Cultivating Holistic Agent Evolver via On-Policy Distillation", arXiv 2606.17628)."""

from stackrl_opdevolver.config import OpdevolverConfig
from stackrl_opdevolver.plugin import MEMORY, Opdevolver

__all__ = ["MEMORY", "Opdevolver", "OpdevolverConfig"]
