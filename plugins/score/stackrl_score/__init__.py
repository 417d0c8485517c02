"""SCoRe: Training Language Models to Self-Correct via Reinforcement Learning (arXiv 2409.12917)."""

from stackrl_score.config import ScoreConfig
from stackrl_score.plugin import Score
from stackrl_score.rewards import attempt_rewards

__all__ = ["Score", "ScoreConfig", "attempt_rewards"]
