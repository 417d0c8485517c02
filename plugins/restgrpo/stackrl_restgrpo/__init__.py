"""ReST-GRPO for stackrl: the data filter and assembly of ReST-RL (arXiv 2508.19576), on the prompt pool."""

from stackrl_restgrpo.assembly import group_spread, partial_prompts, prefix_weights
from stackrl_restgrpo.config import RestGrpoConfig
from stackrl_restgrpo.plugin import RestGrpo

__all__ = ["RestGrpo", "RestGrpoConfig", "group_spread", "partial_prompts", "prefix_weights"]
