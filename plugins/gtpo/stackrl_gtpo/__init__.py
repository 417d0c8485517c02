"""The stackrl plugin `gtpo`."""

from stackrl_gtpo.config import GtpoConfig
from stackrl_gtpo.plugin import Gtpo

__all__ = ["Gtpo", "GtpoConfig"]
