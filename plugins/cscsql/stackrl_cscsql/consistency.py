"""Execution-grouped self-consistency (CSC-SQL §3.1): run each sampled query, group the queries that return the
same rows, rank the groups by their size, and take the first query of the largest groups as the candidates a
merge reviser sees (the largest alone is the self-consistency answer).

Failed queries (an error, a refused write, a timeout) join no group: they cast no vote. A group's key is its rows
as a multiset, the equality of :func:`stackrl.blocks.sandbox.same_rows`, so two queries share a group exactly
when ``same_rows`` says their results match. Groups of equal size keep the order of their first query.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrl.blocks.sandbox import SqlResult


@dataclass(frozen=True)
class Group:
    """The samples (indices, in sampling order) whose queries returned the same rows; the first is its query."""

    members: tuple[int, ...]

    @property
    def first(self) -> int:
        return self.members[0]

    @property
    def votes(self) -> int:
        return len(self.members)


def result_key(result: SqlResult) -> tuple[str, ...] | None:
    """What groups a result: its rows as a sorted multiset (``None`` for a failed query, which joins no group)."""
    if not result.ok:
        return None
    return tuple(sorted(map(repr, result.rows)))


def execution_groups(results: list[SqlResult]) -> list[Group]:
    """The groups of equal results, largest first (ties: the group whose first query came first)."""
    members: dict[tuple[str, ...], list[int]] = {}
    for index, result in enumerate(results):
        key = result_key(result)
        if key is not None:
            members.setdefault(key, []).append(index)
    groups = [Group(tuple(indices)) for indices in members.values()]
    return sorted(groups, key=lambda group: (-group.votes, group.first))


def candidates(groups: list[Group], count: int = 2) -> list[int]:
    """The first sample of each of the ``count`` largest ``groups``: the queries shown to the reviser, the voted
    one first. Empty when no query ran."""
    return [group.first for group in groups[:count]]


def voted(groups: list[Group]) -> int:
    """The self-consistency choice: the first query of the largest group, or sample 0 when no query ran (the
    authors draw one at random there; either is wrong, and this one is the same on every process)."""
    return groups[0].first if groups else 0
