"""The stackrl plugin `sqlpartial`."""

from stackrl_sqlpartial.plugin import Sqlpartial, SqlpartialConfig

__all__ = ["Sqlpartial", "SqlpartialConfig"]
