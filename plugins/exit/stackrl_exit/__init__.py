"""ExIt for stackrl: Exploratory Iteration's autocurriculum of self-iteration tasks (arXiv 2509.04575), on the
prompt pool."""

from stackrl_exit.buffer import draw_weights, learnability, most_learnable, overflow, self_iteration_prompt
from stackrl_exit.config import ExitConfig
from stackrl_exit.plugin import Exit

__all__ = ["Exit", "ExitConfig", "draw_weights", "learnability", "most_learnable", "overflow", "self_iteration_prompt"]
