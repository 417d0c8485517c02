"""Self-judging for stackrl: the policy checks its own solutions and its verdict is the reward."""

from stackrl_selfjudge.plugin import SelfJudge, SelfJudgeConfig

__all__ = ["SelfJudge", "SelfJudgeConfig"]
