"""ExPO: self-explanation policy optimization ("ExPO: Unlocking Hard Reasoning with Self-Explanation-Guided
Reinforcement Learning", arXiv 2507.02834)."""

from stackrl_expo.config import ExpoConfig
from stackrl_expo.explanations import explanation_prompts, last_step
from stackrl_expo.plugin import Expo

__all__ = ["Expo", "ExpoConfig", "explanation_prompts", "last_step"]
