"""SQLM for stackrl: asymmetric self-play from one topic prompt, the proposer rewarded by the solver's agreement."""

from stackrl_sqlm.plugin import SQLM, SQLMConfig

__all__ = ["SQLM", "SQLMConfig"]
