"""SEED: self-evolving on-policy distillation ("SEED: SElf-Evolving On-Policy Distillation", catalogue 000:109)."""

from stackrl_seedrl.config import SeedrlConfig
from stackrl_seedrl.plugin import Seedrl, skill_advantages

__all__ = ["Seedrl", "SeedrlConfig", "skill_advantages"]
