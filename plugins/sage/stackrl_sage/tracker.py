"""SAGE-light's curriculum: a hint level per prompt, moved after each visit by that visit's accuracy."""

from __future__ import annotations

from stackrl_sage.hints import LEVELS


class LevelTracker:
    """Level 0 (no hint) on a prompt's first visit; after each visit, one level above the level the visit was
    shown at when its accuracy was at most ``up_at`` (capped at the top level), one below when it was above
    ``down_above`` (floored at 0), the same level otherwise."""

    def __init__(self, up_at: float, down_above: float):
        self.up_at = up_at
        self.down_above = down_above
        self.levels: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.levels)

    def level(self, key: str) -> int:
        return self.levels.get(key, 0)

    def update(self, key: str, shown: int, accuracy: float) -> None:
        """Record a visit of ``key`` hinted at level ``shown`` (0 when it went without a hint) with ``accuracy``."""
        if accuracy <= self.up_at:
            shown = min(shown + 1, LEVELS)
        elif accuracy > self.down_above:
            shown = max(shown - 1, 0)
        self.levels[key] = shown
