"""Skill-SP: Skill Self-Play (Qwen-Applications; paper line 001:45), its skill controller."""

from stackrl_skillsp.controller import informativeness, sampling_weights, solve_rates, updated_utility
from stackrl_skillsp.plugin import SkillSP, SkillSPConfig

__all__ = ["SkillSP", "SkillSPConfig", "informativeness", "sampling_weights", "solve_rates", "updated_utility"]
