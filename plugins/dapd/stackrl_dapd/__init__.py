"""DAPD: Dual-Anchored Policy Distillation ("DAPD: Dual-Anchored Policy Distillation", arXiv 2608.01735)."""

from stackrl_dapd.config import DapdConfig
from stackrl_dapd.objective import clipped_forward_kl, dapd_loss, dapd_terms, reference_ids, view_contexts
from stackrl_dapd.plugin import Dapd

__all__ = ["Dapd", "DapdConfig", "clipped_forward_kl", "dapd_loss", "dapd_terms", "reference_ids", "view_contexts"]
