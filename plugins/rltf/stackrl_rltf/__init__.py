"""RL from Text Feedback: RLTF-SD and RLTF-FM ("Expanding the Capabilities of Reinforcement Learning via Text
Feedback", arXiv 2602.02482)."""

from stackrl_rltf.config import RltfConfig
from stackrl_rltf.plugin import Rltf

__all__ = ["Rltf", "RltfConfig"]
