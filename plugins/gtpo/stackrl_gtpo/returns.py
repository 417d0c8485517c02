"""GTPO's three rules on per-turn values (arXiv 2511.14846, section 3): turn-level rewards, self-supervised
shaping of a failed row's outcome by its code's similarity to the group's successful rows' code, and advantages
that are each turn's discounted return normalised against the same turn of the group's other rows."""

from __future__ import annotations

import re
from collections.abc import Sequence

from stackrl.blocks.env import discounted_returns
from stackrl.blocks.selfinstruct import rouge_l

_CODE_TOKENS = re.compile(r"\w+|[^\w\s]")


def code_tokens(code: str) -> list[str]:
    """The tokens code is compared on: names, numbers and each operator or bracket (ROUGE's own tokens drop the
    operators, which are most of an arithmetic cell)."""
    return _CODE_TOKENS.findall(code)


def code_similarity(first: str, second: str) -> float:
    """ROUGE-L F of two programs' tokens, in [0, 1]."""
    return rouge_l(code_tokens(first), code_tokens(second))


def turn_rewards(env_turn_rewards: Sequence[Sequence[float]], totals: Sequence[float]) -> list[list[float]]:
    """Each row's turn rewards: what the environment paid each turn before the last, and the rest of the row's
    total reward (its outcome) on the last turn, so that a row's turn rewards add up to its total reward."""
    rows = []
    for paid, total in zip(env_turn_rewards, totals, strict=True):
        if not paid:
            rows.append([])
            continue
        rows.append([float(r) for r in paid[:-1]] + [float(total) - sum(float(r) for r in paid[:-1])])
    return rows


def shaping(totals: Sequence[float], codes: Sequence[str], group_size: int, *, success: float,
            weight: float) -> list[float]:
    """Each row's shaping term: for a failed row (total below ``success``) in a group with successful rows,
    ``weight`` times the mean similarity of its code to theirs; 0 for every other row."""
    out = [0.0] * len(totals)
    for start in range(0, len(totals), group_size):
        rows = range(start, min(start + group_size, len(totals)))
        good = [j for j in rows if totals[j] >= success]
        if not good:
            continue
        for i in rows:
            if totals[i] < success:
                out[i] = weight * sum(code_similarity(codes[i], codes[j]) for j in good) / len(good)
    return out


def shaped(rewards: Sequence[Sequence[float]], terms: Sequence[float]) -> list[list[float]]:
    """The turn rewards with each row's shaping term added to its last turn (the outcome it densifies)."""
    return [list(row[:-1]) + [row[-1] + term] if row else [] for row, term in zip(rewards, terms, strict=True)]


def returns(rewards: Sequence[Sequence[float]], gamma: float) -> list[list[float]]:
    """Each turn's discounted return ``G_t = r_t + gamma * G_{t+1}`` (the env block's)."""
    return discounted_returns(rewards, gamma)
