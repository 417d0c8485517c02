"""Reward weights that may change with the training step.

A reward component's weight is a schedule: pieces ``(from_step, weight)``, each weight holding from its step until
the next piece's. The config writes it as a number (one piece from step 0) or as a mapping ``{step: weight}``
whose first step is 0::

    rewards:
      exact_match: 1.0              # 1.0 at every step
      mrrlvr: {0: 1.0, 40: 0.0}     # 1.0 for the rollouts of steps 0..39, 0.0 from step 40 on

The step is the trainer's global step when a rollout is generated (``ctx.step`` in its reward hooks): the
rollout trained as step ``s + 1`` is weighed by the weight at ``s``. A schedule is a function of that step alone,
so every process weighs a rollout alike and a resumed run weighs it as an uninterrupted one would.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

from stackrl.errors import ConfigError


@dataclass(frozen=True)
class Schedule:
    """Piecewise-constant weights: ``pieces`` are ``(from_step, weight)`` in rising step order, the first at 0."""

    pieces: tuple[tuple[int, float], ...]

    @property
    def constant(self) -> bool:
        return len({weight for _, weight in self.pieces}) == 1

    def at(self, step: int) -> float:
        weight = self.pieces[0][1]
        for start, value in self.pieces:
            if step < start:
                break
            weight = value
        return weight


def _weight(value, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(f"{key}: a weight must be a finite number, not {value!r}")
    return float(value)


def _step(value, key: str) -> int:
    # A step set alone on the command line (rewards.x.40=0, with no file's schedule to merge into) is the string "40".
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ConfigError(f"{key}: a schedule's keys are training steps (integers >= 0), not {value!r}")
    return int(value)


def schedule(value, key: str) -> Schedule:
    """The schedule a config value gives: a number, or a mapping ``{step: weight}`` starting at step 0. ``key`` is
    the config key it came from, named in every error."""
    if isinstance(value, Mapping):
        if not value:
            raise ConfigError(f"{key}: a weight schedule needs at least the weight at step 0, e.g. {{0: 1.0}}")
        pieces = sorted((_step(step, key), _weight(weight, f"{key}.{step}")) for step, weight in value.items())
        if pieces[0][0] != 0:
            raise ConfigError(
                f"{key}: a weight schedule starts at step 0 (its first key is {pieces[0][0]}); add the weight "
                f"before it, e.g. {{0: 1.0, {pieces[0][0]}: ...}}"
            )
        if len({step for step, _ in pieces}) != len(pieces):
            raise ConfigError(f"{key}: a step appears twice in the weight schedule")
        return Schedule(tuple(pieces))
    return Schedule(((0, _weight(value, key)),))


def reward_schedules(weights: Mapping | None, components: list[str], defaults: Mapping) -> dict[str, Schedule]:
    """A schedule for each of ``components``: the config's (``weights``), else ``defaults[name]``, else 1.0. A
    weight for a name that is no component of the run is an error."""
    weights = dict(weights or {})
    for name in weights:
        if name not in components:
            raise ConfigError(
                f"rewards.{name}: no reward component of that name in this run; available: "
                f"{', '.join(components) or 'none'}"
            )
    return {
        name: schedule(weights[name], f"rewards.{name}") if name in weights
        else schedule(defaults.get(name, 1.0), f"the default weight of reward component '{name}'")
        for name in components
    }
