"""eva for stackrl: the creator's regret-guided sampling and evolving of prompts, on the prompt pool."""

from stackrl_eva.plugin import Eva, EvaConfig

__all__ = ["Eva", "EvaConfig"]
