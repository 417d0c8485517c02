"""Tool-Star's hierarchical reward over an episode of the environment runner (Tool_Star_RL reward_score/re_search.py
``compute_score``, read against the runner's columns rather than tags in the text):

    r = malformed                 if the row is malformed
        wrong                     if well-formed and the answer is wrong
        right + bonus             if well-formed, right, and >= min_tools distinct tools ran without raising
        right                     otherwise
"""

from __future__ import annotations

from dataclasses import dataclass

# The turn-info keys that make a row malformed: a tool the environment lacks, a turn with no action the grammar reads,
# an environment failure (stackrl.blocks.env.runner).
MALFORMED_INFO = ("unknown_tool", "unparsed", "error")


@dataclass(frozen=True)
class Episode:
    """What the reward reads of a row: whether it is well-formed, and the distinct tools it called successfully."""

    well_formed: bool
    tools: frozenset[str]
    raised: int  # calls whose tool raised (env_info's tool_error): not counted in `tools`


def episode(infos: list[dict] | None, end: str | None, answered: bool) -> Episode:
    """A row's facts from its runner columns (``env_info``, ``env_end``; None on a rollout without the runner) and
    whether its final answer is readable."""
    infos = infos or []
    well_formed = answered and end in (None, "done") and not any(k in info for info in infos for k in MALFORMED_INFO)
    tools = frozenset(info["tool"] for info in infos if "tool" in info and "tool_error" not in info)
    raised = sum("tool" in info and "tool_error" in info for info in infos)
    return Episode(well_formed, tools, raised)


def hierarchical_reward(facts: Episode, correct: bool, *, malformed: float, wrong: float, right: float,
                        bonus: float, min_tools: int) -> float:
    """The reward of one row (module docstring)."""
    if not facts.well_formed:
        return malformed
    if not correct:
        return wrong
    return right + (bonus if len(facts.tools) >= min_tools else 0.0)
