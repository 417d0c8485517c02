"""TriPlay-RL: attacker, defender and evaluator roles of one policy, trained in turn (stackrl plugin)."""

from stackrl_triplay.config import Grader, TriPlayConfig
from stackrl_triplay.plugin import TriPlay

__all__ = ["Grader", "TriPlay", "TriPlayConfig"]
