"""The stackrl plugin `csa`."""

from stackrl_csa.plugin import Csa, CsaConfig

__all__ = ["Csa", "CsaConfig"]
