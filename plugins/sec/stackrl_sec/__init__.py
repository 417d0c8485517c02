"""SEC: Self-Evolving Curriculum ("Self-Evolving Curriculum for LLM Reasoning", arXiv 2505.14970)."""

from stackrl_sec.bandit import category_rewards, draw_probabilities, updated_values
from stackrl_sec.config import SecConfig
from stackrl_sec.plugin import Sec

__all__ = ["Sec", "SecConfig", "category_rewards", "draw_probabilities", "updated_values"]
