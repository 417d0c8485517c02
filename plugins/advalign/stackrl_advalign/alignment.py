"""The advantage-alignment credit of one seat's turns from its own and its opponent's turn advantages (Duque et
al., arXiv 2406.14662, eq. for A*; the LLM version's group-relative advantages, Trust-and-Split paper), and the two
row maps it needs in a rollout of paired seats: each row's opponent row, and each turn's leave-one-out advantage
against the same seat's same turn in the other episodes of its group."""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.env import discounted_returns, turn_leave_one_out


def aligned(own: Sequence[float], other: Sequence[float] | None, *, beta: float, gamma: float,
            include_current: bool = True) -> list[float]:
    """Each turn's credit ``A_i(t) + beta * w(t) * A_j(t)``, ``A_i`` the seat's own turn advantages, ``A_j`` its
    opponent's at the same turn (a turn the opponent did not reach, or no opponent: no shaping term).

    ``w(t)`` is the seat's discounted past advantages: ``sum_{k<=t} gamma^(t-k) A_i(k)`` with ``include_current``
    (the LLM code's ``exclude_k_equals_t: False``), else ``gamma * sum_{k<t} gamma^(t-k) A_i(k)`` (the paper's
    equation, one more discount for the turn between).
    """
    out, past = [], 0.0  # past: sum_{k<t} gamma^(t-k) A_i(k), carried forward one discount a turn
    for t, mine in enumerate(own):
        past = gamma * (past + (own[t - 1] if t else 0.0))
        weight = past + mine if include_current else gamma * past
        theirs = other[t] if other is not None and t < len(other) else 0.0
        out.append(mine + beta * weight * theirs)
    return out


def opponents(seats: Sequence[int], episodes: Sequence[int]) -> list[int | None]:
    """Each row's opponent row: the one other row of its episode (another seat). A row alone in its episode (the
    other seats scripted or snapshots) or in an episode of more than two live seats has none."""
    rows: dict[int, list[int]] = {}
    for row, episode in enumerate(episodes):
        rows.setdefault(episode, []).append(row)
    partner: list[int | None] = [None] * len(seats)
    for members in rows.values():
        if len(members) == 2 and seats[members[0]] != seats[members[1]]:
            partner[members[0]], partner[members[1]] = members[1], members[0]
    return partner


def seat_advantages(turn_rewards: Sequence[Sequence[float]], seats: Sequence[int], group_size: int, *,
                    discount: float, per_seat: bool = True) -> list[list[float]]:
    """Each row's turn advantages: its discounted return from each turn on, less the mean of the same turn's returns
    in the other rows of its group (of its own seat with ``per_seat``: each agent's own baseline, as the authors'
    two trainers keep; of every row otherwise) that reached the turn."""
    returns = discounted_returns(turn_rewards, discount)
    advantages: list[list[float]] = [[] for _ in returns]
    for start in range(0, len(returns), group_size):
        group = range(start, min(start + group_size, len(returns)))
        classes = sorted({seats[row] for row in group}) if per_seat else [None]
        for seat in classes:
            members = [row for row in group if seat is None or seats[row] == seat]
            for row, values in zip(members, turn_leave_one_out([returns[r] for r in members], len(members))):
                advantages[row] = values
    return advantages
