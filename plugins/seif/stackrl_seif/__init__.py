"""The stackrl plugin `seif`: SEIF's Instructor and Follower, trained in turn on one policy."""

from stackrl_seif.plugin import SEIF, SEIFConfig

__all__ = ["SEIF", "SEIFConfig"]
