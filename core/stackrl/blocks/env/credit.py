"""Turn-level credit for episodes, beside :func:`stackrl.blocks.roles.group_advantages` (per-seat baselines) and
:func:`stackrl.blocks.turns.segment_advantages` (per-turn normalisation): each row's per-turn rewards (the
``env_turn_rewards`` column) as discounted returns, and a turn's leave-one-out advantage against the same turn of
the other rows of its group. Spread a row's per-turn values over its action tokens with
:func:`stackrl.blocks.turns.rollout_segment_advantages` (the runner's actions are the row's segments).
"""

from __future__ import annotations

from collections.abc import Sequence


def discounted_returns(turn_rewards: Sequence[Sequence[float]], gamma: float) -> list[list[float]]:
    """Each turn's return ``G_t = r_t + gamma * G_{t+1}``, row by row."""
    returns = []
    for rewards in turn_rewards:
        running, row = 0.0, []
        for reward in reversed(rewards):
            running = reward + gamma * running
            row.append(running)
        returns.append(row[::-1])
    return returns


def turn_leave_one_out(values: Sequence[Sequence[float]], group_size: int) -> list[list[float]]:
    """Each turn's value less the mean of the same turn's values in the other rows of its group that reached it;
    a turn no other row of the group reached gets 0."""
    advantages = []
    for start in range(0, len(values), group_size):
        group = values[start : start + group_size]
        for row in group:
            out = []
            for t, value in enumerate(row):
                others = [other[t] for other in group if other is not row and len(other) > t]
                out.append(value - sum(others) / len(others) if others else 0.0)
            advantages.append(out)
    return advantages
