"""R^3: Replay, Reflection and Ranking rewards for group-based RL (catalogue 000:197), its cross-context replay."""

from stackrl_r3.plugin import R3, R3Config, SuccessBuffer

__all__ = ["R3", "R3Config", "SuccessBuffer"]
