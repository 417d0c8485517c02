"""The stackrl plugin `cadence`: on-policy distillation from a larger teacher (DRIFT, COVA, FTB) with a partial-credit
and brevity reward (CCD, LAP)."""

from stackrl_cadence.config import CadenceConfig
from stackrl_cadence.plugin import Cadence

__all__ = ["Cadence", "CadenceConfig"]
