"""The stackrl plugin `triage`: role-typed segment credit (TRIAGE)."""

from stackrl_triage.config import TriageConfig
from stackrl_triage.plugin import Triage

__all__ = ["Triage", "TriageConfig"]
