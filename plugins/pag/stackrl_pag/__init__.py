"""PAG: Policy as Generative Verifier (arXiv 2506.10406)."""

from stackrl_pag.config import PagConfig
from stackrl_pag.plugin import Pag
from stackrl_pag.rewards import segment_rewards

__all__ = ["Pag", "PagConfig", "segment_rewards"]
