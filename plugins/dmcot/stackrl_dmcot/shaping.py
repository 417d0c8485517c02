"""The paper's reward shaping of an episode row: ``bonus`` for each valid action the row's seat had not taken before
in the episode (the exploration bonus for untried actions), ``invalid_penalty`` for each action the environment
refused or the runner could not read (the shaping for valid actions).

A row's actions come from the runner's columns: ``env_moves`` (the episode's parsed actions, ``[seat, action]``)
and ``env_info`` (one dict per turn of the row's seat, ``{"unparsed": True}`` for a turn with no action). A turn the
token budget cut before it stated an action leaves an info but no move, always the row's last; zipping the seat's
moves with its parsed turns' infos drops it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# The info keys by which the built-in games refuse an action (the bandit's "invalid", the two-seat games' "illegal")
# and the runner marks a turn it could not read.
REFUSED = ("invalid", "illegal")
UNPARSED = "unparsed"


@dataclass(frozen=True)
class Action:
    key: str  # the action as stated (a game's text; a tool call as JSON)
    valid: bool  # the environment took it


def row_actions(seat: int, moves: list, infos: list[dict]) -> tuple[list[Action], int]:
    """The actions of the row playing ``seat``, in order, and the number of its turns that stated no action."""
    own = [move for s, move in moves if s == seat]
    parsed = [info for info in infos if not info.get(UNPARSED)]
    actions = [
        Action(move if isinstance(move, str) else json.dumps(move, sort_keys=True),
               not any(key in info for key in REFUSED) and "error" not in info)
        for move, info in zip(own, parsed)
    ]
    return actions, len(infos) - len(parsed)


def untried(actions: list[Action]) -> list[bool]:
    """Per action: valid and not taken before in the episode (a refused action earns nothing, nor marks its key as
    tried)."""
    tried, flags = set(), []
    for action in actions:
        new = action.valid and action.key not in tried
        flags.append(new)
        if action.valid:
            tried.add(action.key)
    return flags


def shaped_reward(actions: list[Action], unparsed: int, bonus: float, invalid_penalty: float) -> float:
    """The row's shaping: ``bonus`` per untried valid action plus ``invalid_penalty`` per refused action or turn
    with no action."""
    invalid = sum(not a.valid for a in actions) + unparsed
    return bonus * sum(untried(actions)) + invalid_penalty * invalid
