"""SAGE: self-hinted GRPO ("Self-Hinting Language Models Enhance RL", arXiv 2602.03143)."""

from stackrl_sage.config import SageConfig
from stackrl_sage.hints import parse_hints, solution_hints
from stackrl_sage.plugin import Sage

__all__ = ["Sage", "SageConfig", "parse_hints", "solution_hints"]
