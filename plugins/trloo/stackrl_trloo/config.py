"""TRLOO's settings."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError

LONE = ("reward", "zero")


@dataclass
class TrlooConfig:
    # A group with one scored completion has no other to compare it with. The authors' code takes a baseline of 0
    # there, so the completion's advantage is its return ("reward"); "zero" gives it no advantage, as GRPO would.
    lone: str = "reward"

    def __post_init__(self):
        if self.lone not in LONE:
            raise ConfigError(f"trloo.lone: must be one of {', '.join(LONE)}, not {self.lone!r}")
