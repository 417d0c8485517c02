"""R^3's in-context self-reflection: a prompt that keeps failing is asked again with its past failure shown.

Each group's first failed sample is stored as its prompt's latest failure, after the step's choices, so the attempt
shown is always one from an earlier step. A group whose samples all fail again, with no stored success to replay,
is a persistent failure: the policy is asked the question after that failure (the roles block's retry format, which
``stackrl/arith-skills`` was taught), and its refined answer takes the group's last row.
"""

from __future__ import annotations


class FailureStore:
    """Per prompt (by its tokens), the text of one failed completion from an earlier step."""

    def __init__(self):
        self.failures: dict[tuple[int, ...], str] = {}

    def store(self, samples: list, correct: list[bool], answered: list[bool], group_size: int) -> None:
        """Keep each answered group's first failed sample as its prompt's latest failure."""
        for start in range(0, len(samples), group_size):
            rows = range(start, start + group_size)
            row = next((i for i in rows if answered[i] and not correct[i]), None)
            if row is not None:
                self.failures[tuple(samples[row].prompt_ids)] = samples[row].text

    def shown(self, samples: list, groups: list[int], group_size: int) -> dict[int, str]:
        """The stored failure of each of ``groups``' prompt, for the groups whose prompt has one."""
        found = {g: self.failures.get(tuple(samples[g * group_size].prompt_ids)) for g in groups}
        return {g: text for g, text in found.items() if text is not None}
