"""SCFT + RLERR: self-critique fine-tuning and RL with effective reflection rewards (Wang et al., arXiv 2601.12720)."""

from stackrl_scft.config import ScftConfig
from stackrl_scft.critiques import critique_kind, kept_critique, phase_rows
from stackrl_scft.plugin import Scft
from stackrl_scft.reflection import reflection_case, row_reward

__all__ = ["Scft", "ScftConfig", "critique_kind", "kept_critique", "phase_rows", "reflection_case", "row_reward"]
