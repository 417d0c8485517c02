"""EvoEnv: the policy writes environment programs, the sandbox runs them, solve-verify asymmetry decides which are
kept, and the policy trains on the kept ones' instances."""

from stackrl_evoenv.config import EvoEnvConfig
from stackrl_evoenv.plugin import EvoEnv

__all__ = ["EvoEnv", "EvoEnvConfig"]
