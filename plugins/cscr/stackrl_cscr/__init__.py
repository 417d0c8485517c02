"""CSCR: Counterfactual Sensitivity Credit Reallocation, an extension of GRPO."""

from stackrl_cscr.plugin import Cscr, CscrConfig, sensitivity

__all__ = ["Cscr", "CscrConfig", "sensitivity"]
