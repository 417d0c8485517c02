"""AERO for stackrl: self-questioning, answering and correcting in one policy, the questions kept by their answer
entropy (the ZPD) and labelled by two independent corrections."""

from stackrl_aero.plugin import AERO, AEROConfig

__all__ = ["AERO", "AEROConfig"]
