"""Self-rewarding correction for mathematical reasoning (Xiong et al., arXiv 2502.19613)."""

from stackrl_selfcorrect.collection import Collected, collect
from stackrl_selfcorrect.config import SelfcorrectConfig
from stackrl_selfcorrect.plugin import Selfcorrect

__all__ = ["Collected", "Selfcorrect", "SelfcorrectConfig", "collect"]
