"""A gate that switches a term off once a batch statistic collapses, with its state kept across checkpoints.

Self-distillation terms that push the student away from its teacher are safe only while the teacher still has
something to say: once the teacher's entropy collapses, its distribution carries no alternative worth moving
toward or away from. :class:`CollapseGate` watches one number per batch (a mean entropy, say) and closes when it
falls below a threshold, absolute or a fraction of the first value it saw.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrl.errors import StackrlError


@dataclass
class CollapseGate:
    """Open until the watched value falls below ``threshold`` (or ``threshold`` times the first value seen, with
    ``relative``); with ``latch`` it then stays closed, else it reopens when the value recovers.

    With ``smoothing`` the gate compares an exponential moving average of the values (``smoothing`` the weight
    of the past) rather than each batch's own, so that one unusual batch does not close it.

    Update it from values every process sees alike (the sample, reward or advantage stage's whole batch), so
    that its state stays identical everywhere; carry it through checkpoints with ``state_dict``.
    """

    threshold: float
    relative: bool = False
    latch: bool = True
    smoothing: float = 0.0
    baseline: float | None = None  # the first value seen: what a relative threshold is a fraction of
    value: float | None = None  # the smoothed value the gate last compared
    is_open: bool = True
    closed_at: int | None = None  # the step it last closed at

    def __post_init__(self):
        if self.threshold < 0 or (self.relative and self.threshold > 1):
            bound = "[0, 1] (a fraction of the first value)" if self.relative else "[0, inf)"
            raise StackrlError(f"CollapseGate: threshold must lie in {bound}, not {self.threshold}")
        if not 0.0 <= self.smoothing < 1.0:
            raise StackrlError(f"CollapseGate: smoothing must lie in [0, 1), not {self.smoothing}")

    @property
    def limit(self) -> float | None:
        """The value below which the gate closes; ``None`` before a relative gate has seen its first value."""
        if not self.relative:
            return self.threshold
        return None if self.baseline is None else self.threshold * self.baseline

    @property
    def settled(self) -> bool:
        """Closed for good: a latched gate that has closed needs no more values."""
        return self.latch and not self.is_open

    def update(self, value: float, step: int) -> bool:
        """Take this batch's ``value`` (seen at ``step``); returns whether the gate is open afterwards."""
        if self.settled:
            return False
        if self.value is None:
            self.value = self.baseline = float(value)
        else:
            self.value = self.smoothing * self.value + (1.0 - self.smoothing) * float(value)
        collapsed = self.value < self.limit
        if collapsed and self.is_open:
            self.closed_at = step
        self.is_open = not collapsed
        return self.is_open

    def state_dict(self) -> dict:
        return {"baseline": self.baseline, "value": self.value, "is_open": self.is_open, "closed_at": self.closed_at}

    def load_state_dict(self, state: dict) -> None:
        self.baseline, self.value = state["baseline"], state["value"]
        self.is_open, self.closed_at = state["is_open"], state["closed_at"]
