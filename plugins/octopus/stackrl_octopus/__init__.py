"""Octopus: Learning Self-Correction in Vision-Language Models via Rollout Augmentation (arXiv 2602.08503)."""

from stackrl_octopus.config import OctopusConfig
from stackrl_octopus.plugin import Octopus
from stackrl_octopus.rewards import correction_reward
from stackrl_octopus.selection import select_pairs

__all__ = ["Octopus", "OctopusConfig", "correction_reward", "select_pairs"]
