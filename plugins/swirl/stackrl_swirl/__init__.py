"""SWIRL: self-improving world modelling with latent actions ("Self-Improving World Modelling with Latent Actions",
arXiv 2602.06130)."""

from stackrl_swirl.config import SwirlConfig
from stackrl_swirl.plugin import Swirl

__all__ = ["Swirl", "SwirlConfig"]
