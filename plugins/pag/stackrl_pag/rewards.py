"""PAG's per-segment rewards."""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.turns import ANSWER, verdicts_right


def segment_rewards(kinds: Sequence[str], outcomes: Sequence, shaping: float) -> list[float]:
    """One reward per segment of a trajectory, in order.

    ``outcomes[k]`` is, for an answer, whether it is right; for a verification, its verdict (True: "correct",
    False: "wrong", None: none). An answer earns its correctness, plus ``shaping`` times the change from the answer
    before it; a verification earns 1 when its verdict matches the correctness of the answer it checked, else 0.
    """
    rewards, previous, right = [], None, iter(verdicts_right(kinds, outcomes))
    for kind, outcome in zip(kinds, outcomes):
        if kind == ANSWER:
            value = float(outcome)
            rewards.append(value if previous is None else value + shaping * (value - previous))
            previous = value
        else:
            rewards.append(float(next(right)))
    return rewards
