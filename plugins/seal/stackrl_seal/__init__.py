"""SEAL for stackrl: self-edits rewarded by the downstream performance of the model they update (arXiv 2506.10943)."""

from stackrl_seal.config import SealConfig
from stackrl_seal.plugin import Seal

__all__ = ["Seal", "SealConfig"]
