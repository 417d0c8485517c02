"""SDRL: Self-Debate Reinforcement Learning (arXiv 2601.22297)."""

from stackrl_sdrl.config import SdrlConfig
from stackrl_sdrl.debate import debate_prompt, diverse_candidates
from stackrl_sdrl.plugin import Sdrl

__all__ = ["Sdrl", "SdrlConfig", "debate_prompt", "diverse_candidates"]
