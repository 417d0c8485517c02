"""RISE: Reinforcing Reasoning with Self-Verification ("Trust, But Verify", arXiv 2505.13445)."""

from stackrl_rise.config import RiseConfig
from stackrl_rise.plugin import Rise
from stackrl_rise.scores import critique_score, solution_score

__all__ = ["Rise", "RiseConfig", "critique_score", "solution_score"]
