"""SeRL for stackrl: a label-free majority-vote reward and an online difficulty filter."""

from stackrl_serl.plugin import SeRL, SeRLConfig

__all__ = ["SeRL", "SeRLConfig"]
