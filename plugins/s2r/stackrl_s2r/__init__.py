"""S^2R: Teaching LLMs to Self-verify and Self-correct via Reinforcement Learning (arXiv 2502.12853)."""

from stackrl_s2r.config import S2rConfig
from stackrl_s2r.credit import HistoryBaseline, histories, leave_one_out, turn_advantages, turn_rewards
from stackrl_s2r.plugin import S2r

__all__ = ["HistoryBaseline", "S2r", "S2rConfig", "histories", "leave_one_out", "turn_advantages", "turn_rewards"]
