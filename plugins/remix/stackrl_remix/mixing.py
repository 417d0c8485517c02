"""ReMix's mix of a group: how many rows each step samples fresh, and which stored rows may fill the rest."""

from __future__ import annotations

import math
from typing import Sequence


def fresh_count(group_size: int, fresh_share: float) -> int:
    """The rows of a group sampled by the policy now: ``fresh_share`` of the group, rounded up, at least one (so
    every group has an on-policy row, and its prompt's tokens to look the stored rows up by)."""
    return min(group_size, max(1, math.ceil(fresh_share * group_size - 1e-9)))


def age(record, batch: int) -> int:
    """How many rollout batches ago ``record`` was sampled (its ``step`` holds the batch index that sampled it)."""
    return batch - record.step


def usable(record, batch: int, max_age: int) -> bool:
    """Whether a stored row may still be replayed at rollout batch ``batch``: sampled at most ``max_age`` batches
    before it (the policies that wrote it are the recent ones; older rows are evicted)."""
    return 1 <= age(record, batch) <= max_age


def pick_stale(records: Sequence, batch: int, max_age: int, k: int) -> list:
    """Up to ``k`` of a prompt's stored ``records`` (oldest first, as the library gives them) to replay at
    ``batch``: the newest usable ones first."""
    if k <= 0:
        return []
    return [r for r in reversed(records) if usable(r, batch, max_age)][:k]
