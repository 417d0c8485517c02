"""CoVo for stackrl: a self-reward from the consistency and volatility of intermediate reasoning states."""

from stackrl_covo.config import CoVoConfig
from stackrl_covo.plugin import CoVo

__all__ = ["CoVo", "CoVoConfig"]
