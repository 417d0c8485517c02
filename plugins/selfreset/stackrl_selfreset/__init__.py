"""The stackrl plugin `selfreset`: Self-ReSET's guard reward and resets from the policy's own flagged prefixes."""

from stackrl_selfreset.config import SelfresetConfig
from stackrl_selfreset.plugin import Selfreset

__all__ = ["Selfreset", "SelfresetConfig"]
