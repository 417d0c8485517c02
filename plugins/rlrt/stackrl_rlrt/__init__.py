"""RLRT: RLVR with a reversed teacher ("Rebellious Student: Reversing Teacher Signals for Reasoning Exploration
with Self-Distilled RLVR", arXiv 2605.10781)."""

from stackrl_rlrt.plugin import Rlrt, RlrtConfig

__all__ = ["Rlrt", "RlrtConfig"]
