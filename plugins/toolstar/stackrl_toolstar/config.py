"""The `toolstar:` config section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import stackrl
from stackrl.rewards import OutcomeSettings


@dataclass
class ToolstarConfig(OutcomeSettings):
    """The hierarchical reward's levels; ``metric`` and ``answer_column`` (from OutcomeSettings) tell a right answer.
    Defaults are the authors' (Tool_Star_RL reward_score/re_search.py): -1 malformed, 0 wrong, 1 right (their F1 of
    an exactly right answer), +0.1 for a right answer reached with both tools."""

    section: ClassVar[str] = "toolstar"
    # malformed: a row whose episode did not end in an answer turn with a readable final answer, or that called a
    # tool the environment lacks or wrote an unparsed turn (the authors': -1).
    malformed: float = -1.0
    # wrong: a well-formed row whose answer is wrong (the authors': 0).
    wrong: float = 0.0
    # right: a well-formed row whose answer is right (the authors': the answer's F1, 1 when exact; ours: 1, exact_match).
    right: float = 1.0
    # bonus: added to a right row that called at least `min_tools` distinct tools successfully (the authors': 0.1).
    bonus: float = 0.1
    # min_tools: distinct tools a right row must have called without the tool raising to earn the bonus (the
    # authors': both of search and python, i.e. 2 of their two bonus tools).
    min_tools: int = 2

    def check(self) -> None:
        if not self.malformed < self.wrong:
            raise stackrl.ConfigError(f"toolstar.malformed: the levels must rise, malformed < wrong; got "
                                      f"{self.malformed} and {self.wrong}")
        if not self.wrong < self.right:
            raise stackrl.ConfigError(f"toolstar.wrong: the levels must rise, wrong < right; got {self.wrong} and "
                                      f"{self.right}")
        if self.bonus < 0:
            raise stackrl.ConfigError(f"toolstar.bonus: must be non-negative, not {self.bonus}")
        if self.min_tools < 1:
            raise stackrl.ConfigError(f"toolstar.min_tools: must be at least 1, not {self.min_tools}")
