"""CoMAS: Co-Evolving Multi-Agent Systems via Interaction Rewards (arXiv 2510.08529)."""

from stackrl_comas.config import ComasConfig
from stackrl_comas.plugin import Comas
from stackrl_comas.rewards import check_lines, critique_reward, scorer_prompt, solution_reward

__all__ = ["Comas", "ComasConfig", "check_lines", "critique_reward", "scorer_prompt", "solution_reward"]
