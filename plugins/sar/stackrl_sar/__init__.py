"""SAR for stackrl: a reward for answers the question makes likely, from two scoring passes."""

from stackrl_sar.plugin import SAR, SARConfig

__all__ = ["SAR", "SARConfig"]
