"""InT for stackrl: self-proposed interventions on failed rollouts, fine-tuned on between RL steps (arXiv 2601.14209)."""

from stackrl_intrl.config import IntrlConfig
from stackrl_intrl.plugin import Intrl

__all__ = ["Intrl", "IntrlConfig"]
