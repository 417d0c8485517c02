"""SAGE-light's curriculum: a hint level per prompt, moved after each visit by that visit's accuracy."""

from __future__ import annotations

from stackrl_sage.hints import LEVELS


class LevelTracker:
    """Level 0 (no hint) on a prompt's first visit; after each visit, one level up when the accuracy was at most
    ``up_at`` (capped at the top level), one down when it was above ``down_above`` (floored at 0)."""

    def __init__(self, up_at: float, down_above: float):
        self.up_at = up_at
        self.down_above = down_above
        self.levels: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.levels)

    def level(self, key: str) -> int:
        return self.levels.get(key, 0)

    def update(self, key: str, accuracy: float) -> None:
        level = self.level(key)
        if accuracy <= self.up_at:
            level = min(level + 1, LEVELS)
        elif accuracy > self.down_above:
            level = max(level - 1, 0)
        self.levels[key] = level
