"""Per prompt, one completion from an earlier step: what a method remembers of its own rollouts across steps.

PMD's teacher reads the prompt's latest verified solution, R^3 replays a stored success into a group that fails
and shows a stored failure to reflect on. Each keeps, per prompt (keyed by its token ids, so text and chat prompts
alike), one value taken from each group's first row that passes the method's test, and looks it up by the prompt
again at a later step: :class:`PromptMemory`. Its state is lists of plain values, which a weights-only checkpoint
load accepts (tuple keys it would not).
"""

from __future__ import annotations

from collections.abc import Sequence


class PromptMemory:
    """One remembered value per prompt. With ``latest`` a newer value replaces the prompt's (the memory moves with
    the policy); otherwise a prompt keeps the first value it got."""

    def __init__(self, latest: bool = True):
        self.latest = latest
        self.values: dict[tuple[int, ...], object] = {}

    def __len__(self) -> int:
        return len(self.values)

    def remember(self, prompt_ids: Sequence[Sequence[int]], values: Sequence, chosen: Sequence[bool],
                 group_size: int) -> int:
        """Store, for each group of ``group_size`` consecutive rows, the value of its first ``chosen`` row as its
        prompt's; returns how many prompts got a new or changed value."""
        changed = 0
        for start in range(0, len(values), group_size):
            row = next((i for i in range(start, min(start + group_size, len(values))) if chosen[i]), None)
            if row is None:
                continue
            key = tuple(prompt_ids[row])
            if key in self.values and not self.latest:
                continue
            changed += self.values.get(key) != values[row]
            self.values[key] = values[row]
        return changed

    def recall(self, prompt_ids: Sequence[Sequence[int]]) -> list:
        """Each prompt's remembered value, ``None`` where it has none."""
        return [self.values.get(tuple(ids)) for ids in prompt_ids]

    def state_dict(self) -> list:
        return [[list(key), value] for key, value in self.values.items()]

    def load_state_dict(self, state: list) -> None:
        self.values = {tuple(key): value for key, value in state}
