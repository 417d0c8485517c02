"""DARE for stackrl: a label-free reward from the distribution of a group's answers."""

from stackrl_dare.plugin import DARE, DAREConfig

__all__ = ["DARE", "DAREConfig"]
