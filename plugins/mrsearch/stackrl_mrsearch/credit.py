"""MR-Search's dense relative advantage at the attempt level (the authors' ``grpo_prm_step`` estimator).

For row ``i`` of a group and attempt ``a``: the attempt's reward ``r_a`` (its answer's exact match; 0 unanswered),
its value ``v_a = r_a + improve * (r_a - r_{a-1})`` (``r_{-1} = 0``; the authors' ``improve_gamma``, 0 in their
training script), its step advantage against the same attempt of the group's other rows that reached it,
leave-one-out and unscaled (``A_a = v_a - mean_{j != i} v_{j,a}``; 0 where no other row reached it), then summed
over the row's later attempts (``C_a = A_a + discount * C_{a+1}``; discount 1 in the authors' script). Every action
token of attempt ``a`` gets ``C_a``; observations, reflections shown by the environment and padding get 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from stackrl.blocks.env import discounted_returns, turn_leave_one_out
from stackrl.blocks.roles import broadcast_segments
from stackrl.blocks.turns import Segment


def action_attempts(infos: Sequence[Sequence[dict]]) -> list[list[int]]:
    """Each row's attempt index per action, from the environment's ``info["attempt"]``; an action without one (the
    runner's unparsed or failed turn) belongs to the attempt of the action before it (0 first)."""
    out = []
    for row in infos:
        current, attempts = 0, []
        for info in row:
            current = int(info.get("attempt", current))
            attempts.append(current)
        out.append(attempts)
    return out


def attempt_rewards(turn_rewards: Sequence[Sequence[float]], attempts: Sequence[Sequence[int]]) -> list[list[float]]:
    """Each row's reward per attempt it reached (the sum of its actions' turn rewards: the answer's)."""
    out = []
    for rewards, row in zip(turn_rewards, attempts, strict=True):
        per = [0.0] * (max(row) + 1 if row else 0)
        for reward, attempt in zip(rewards, row):
            per[attempt] += float(reward)
        out.append(per)
    return out


def attempt_values(rewards: Sequence[Sequence[float]], improve: float) -> list[list[float]]:
    """``v_a = r_a + improve * (r_a - r_{a-1})``, ``r_{-1} = 0``."""
    return [[r + improve * (r - (row[a - 1] if a else 0.0)) for a, r in enumerate(row)] for row in rewards]


def attempt_advantages(values: Sequence[Sequence[float]], group_size: int, discount: float) -> list[list[float]]:
    """Each attempt's leave-one-out advantage against the group's same attempt, summed over the row's later ones."""
    return discounted_returns(turn_leave_one_out(values, group_size), discount)


def token_advantages(
    turn_rewards: Sequence[Sequence[float]], infos: Sequence[Sequence[dict]], segments: Sequence[Sequence[Segment]],
    group_size: int, width: int, *, improve: float, discount: float,
) -> tuple[torch.Tensor, list[list[float]]]:
    """``(N, width)`` per-token advantages (each action's tokens get their attempt's ``C_a``), and the rows'
    attempt rewards."""
    attempts = action_attempts(infos)
    rewards = attempt_rewards(turn_rewards, attempts)
    credit = attempt_advantages(attempt_values(rewards, improve), group_size, discount)
    values, spans = [], []
    for row_segments, row_attempts, row_credit in zip(segments, attempts, credit, strict=True):
        n = min(len(row_segments), len(row_attempts))
        values.append([row_credit[a] for a in row_attempts[:n]])
        spans.append([(s.start, s.end) for s in row_segments[:n]])
    return broadcast_segments(values, spans, width), rewards
