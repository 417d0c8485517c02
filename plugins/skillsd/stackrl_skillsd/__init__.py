"""Skill-SD: skill-conditioned self-distillation ("Skill-SD: Skill-Conditioned Self-Distillation for Multi-turn LLM
Agents", arXiv 2604.10674)."""

from stackrl_skillsd.config import SkillsdConfig
from stackrl_skillsd.loss import importance_weighted_reverse_kl, importance_weights
from stackrl_skillsd.plugin import Skillsd

__all__ = ["Skillsd", "SkillsdConfig", "importance_weighted_reverse_kl", "importance_weights"]
