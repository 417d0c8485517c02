"""CSA's reward: each completion's decision, attempt or delegate, scored against whether its problem is solvable.

A completion *delegates* when it holds the delegation phrase, and *attempts* otherwise. An attempt earns the table's
``attempt_right`` or ``attempt_wrong`` by its final answer; a delegation earns ``delegate_unsolvable`` or
``delegate_solvable`` by its problem's solvability: the problem is solvable when the model's own pass rate on it is
at least the threshold. With the default table (1, 0, 0, 1) and threshold 0.5 the expected reward of attempting a
problem of pass rate p is p, of delegating it 1 when p < 0.5 and 0 otherwise, so the policy that earns most
delegates exactly the problems it solves less than half of the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


@dataclass(frozen=True)
class DecisionTable:
    """The reward of each outcome of a decision."""

    attempt_right: float = 1.0
    attempt_wrong: float = 0.0
    delegate_solvable: float = 0.0
    delegate_unsolvable: float = 1.0

    def reward(self, delegated: bool, correct: Optional[bool], solvable: Optional[bool]) -> Optional[float]:
        """A delegation's reward by ``solvable``, an attempt's by ``correct``; ``None`` where that one is unknown."""
        if delegated:
            if solvable is None:
                return None
            return self.delegate_solvable if solvable else self.delegate_unsolvable
        if correct is None:
            return None
        return self.attempt_right if correct else self.attempt_wrong


def delegates(text: str, phrase: str) -> bool:
    """Whether a completion delegates: it holds the delegation ``phrase``."""
    return phrase in text


def pass_rate(outcomes: Sequence[bool]) -> Optional[float]:
    """The share of right attempts among ``outcomes``; ``None`` for none."""
    return sum(outcomes) / len(outcomes) if outcomes else None


def is_solvable(rate: Optional[float], threshold: float) -> Optional[bool]:
    """A problem is solvable when its pass rate is at least ``threshold``; unknown without a pass rate."""
    return None if rate is None else rate >= threshold


def group_rewards(
    delegated: Sequence[bool],
    correct: Sequence[Optional[bool]],
    probes: Sequence[Sequence[bool]],
    group_size: int,
    table: DecisionTable,
    threshold: float,
    *,
    count_group: bool = True,
) -> tuple[list[Optional[float]], list[Optional[float]]]:
    """Every row's reward and every group's pass rate.

    Row ``i`` belongs to group ``i // group_size``; ``correct[i]`` is whether an attempt is right (``None`` for a
    delegation or a row without an answer), ``probes[g]`` the outcomes of group ``g``'s extra attempts. A group's pass
    rate is over its probes and, with ``count_group``, its own judged attempts.
    """
    rewards: list[Optional[float]] = []
    rates: list[Optional[float]] = []
    for g, start in enumerate(range(0, len(delegated), group_size)):
        rows = range(start, start + group_size)
        own = [bool(correct[i]) for i in rows if not delegated[i] and correct[i] is not None] if count_group else []
        rate = pass_rate([*own, *probes[g]])
        solvable = is_solvable(rate, threshold)
        rates.append(rate)
        rewards.extend(table.reward(delegated[i], correct[i], solvable) for i in rows)
    return rewards, rates


def decision_accuracy(delegated: Sequence[bool], solvable: Sequence[Optional[bool]]) -> Optional[float]:
    """The share of rows with a known solvability whose decision fits it: attempted and solvable, or delegated and
    unsolvable (``None`` for no such row)."""
    fits = [d != s for d, s in zip(delegated, solvable) if s is not None]
    return sum(fits) / len(fits) if fits else None
