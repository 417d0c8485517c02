"""S^2R's process-level credit: each turn's own reward, less the running mean of the rewards earned after the
same history of turns, doubled where the authors double it."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from stackrl.blocks.turns import ANSWER, verdicts_right


def turn_rewards(kinds: Sequence[str], outcomes: Sequence) -> list[int]:
    """One reward per segment, in order, each +1 or -1: an answer +1 when right; a verification +1 when its
    verdict is what the answer before it is ("correct" to a right one, "wrong" to a wrong one), -1 otherwise, a
    missing verdict included. ``outcomes[k]`` is an answer's correctness or a verification's verdict (True
    "correct", False "wrong", None none), as :func:`stackrl.blocks.turns.judged_turns` gives them."""
    right = iter(verdicts_right(kinds, outcomes))
    return [(1 if outcome else -1) if kind == ANSWER else (1 if next(right) else -1)
            for kind, outcome in zip(kinds, outcomes, strict=True)]


def histories(kinds: Sequence[str], rewards: Sequence[int]) -> list[str]:
    """The history before each segment, the key of its baseline: the rewards of the turns before it, in order,
    each an answer's ``R`` or a verification's ``V`` and its sign (``""``, ``"R-1"``, ``"R-1V1"``, ...)."""
    keys, key = [], ""
    for kind, reward in zip(kinds, rewards, strict=True):
        keys.append(key)
        key += f"{'R' if kind == ANSWER else 'V'}{reward}"
    return keys


class HistoryBaseline:
    """The running mean of the rewards earned at each history, over every training batch so far; a history seen
    fewer than ``min_count`` times has baseline 0. A batch's rewards join the means after its advantages are taken
    (:meth:`add`), so a segment is never its own baseline."""

    def __init__(self, min_count: int):
        self.min_count = min_count
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def __call__(self, key: str) -> float:
        count = self.counts.get(key, 0)
        return self.sums[key] / count if count >= self.min_count else 0.0

    def add(self, keys: Sequence[str], rewards: Sequence[float]) -> None:
        for key, reward in zip(keys, rewards, strict=True):
            self.sums[key] = self.sums.get(key, 0.0) + float(reward)
            self.counts[key] = self.counts.get(key, 0) + 1

    def state_dict(self) -> dict:
        return {"sums": dict(self.sums), "counts": dict(self.counts)}

    def load_state_dict(self, state: dict) -> None:
        self.sums = {k: float(v) for k, v in state["sums"].items()}
        self.counts = {k: int(v) for k, v in state["counts"].items()}


def turn_advantages(kinds: Sequence[str], rewards: Sequence[int], baseline, *, verify_bonus: float,
                    change_bonus: float) -> list[float]:
    """Each segment's advantage: its reward less ``baseline(history)``, times ``verify_bonus`` for a verification
    of a right answer and ``change_bonus`` for an answer whose correctness differs from the answer before it."""
    advantages, last_answer = [], None
    for kind, reward, key in zip(kinds, rewards, histories(kinds, rewards), strict=True):
        value = reward - baseline(key)
        if kind == ANSWER:
            if last_answer is not None and reward != last_answer:
                value *= change_bonus
            last_answer = reward
        elif last_answer == 1:
            value *= verify_bonus
        advantages.append(value)
    return advantages


def leave_one_out(values: Sequence[float], group_size: int) -> torch.Tensor:
    """``(N,)`` RLOO advantages: each value less the mean of the others of its group (the outcome level)."""
    scores = torch.tensor([float(v) for v in values]).view(-1, group_size)
    if group_size < 2:
        return torch.zeros(scores.numel())
    others = (scores.sum(1, keepdim=True) - scores) / (group_size - 1)
    return (scores - others).flatten()
