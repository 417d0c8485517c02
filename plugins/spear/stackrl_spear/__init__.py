"""SPEAR (arXiv 2509.22601): self-imitation of the policy's replayed successes, their advantage recalibrated against
the buffer's median baseline, on a rising coefficient, beside a tool-call reward whose weight falls."""

from stackrl_spear.plugin import Spear, SpearConfig

__all__ = ["Spear", "SpearConfig"]
