"""Level-1 procedural memory: per prompt, the policy's own latest verified solution, kept across steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stackrl import Rollout


class SolutionMemory:
    """One remembered solution per prompt, keyed by the prompt's tokens (text and chat prompts alike).

    ``remember`` stores the first passing completion of each group of a rollout: with ``latest``, it replaces what
    the prompt had (the memory moves with the policy), otherwise only a prompt without a memory gets one.
    """

    def __init__(self, latest: bool = True):
        self.latest = latest
        self.solutions: dict[tuple[int, ...], str] = {}

    def __len__(self) -> int:
        return len(self.solutions)

    def recall(self, rollout: Rollout) -> list[str | None]:
        """Each row's remembered solution of its prompt, ``None`` where the prompt has none."""
        return [self.solutions.get(tuple(ids)) for ids in rollout.prompt_ids]

    def remember(self, rollout: Rollout, passed: list[bool]) -> int:
        """Store each group's first passing completion; returns how many prompts got a new or changed memory."""
        size, changed = rollout.group_size, 0
        for start in range(0, len(rollout), size):
            row = next((i for i in range(start, min(start + size, len(rollout))) if passed[i]), None)
            if row is None:
                continue
            key = tuple(rollout.prompt_ids[row])
            if key in self.solutions and not self.latest:
                continue
            changed += self.solutions.get(key) != rollout.completions[row]
            self.solutions[key] = rollout.completions[row]
        return changed
