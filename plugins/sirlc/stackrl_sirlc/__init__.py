"""SIRLC for stackrl: the policy, as a teacher, judges its own answers; the judgement is the reward."""

from stackrl_sirlc.plugin import CORRECTNESS, QUALITY, SIRLC, SIRLCConfig

__all__ = ["CORRECTNESS", "QUALITY", "SIRLC", "SIRLCConfig"]
