"""What the verify groups of a self-verification rollout (stackrl-rise, stackrl-selfverify) give GRPO to learn
from: for the mechanism tests of the plugins whose policy judges its own attempts."""

from __future__ import annotations

from stackrl.context import Rollout
from stackrl.roles import ROLE_COLUMN, VERIFY
from stackrl.tasks import parse_verdict


def verify_signal(rollout: Rollout, reward: str, *, target_column: str = "attempt_correct") -> dict[str, float]:
    """Over the rollout's verify rows, scored by the reward component ``reward``: ``verdict_rate`` (the share of critiques that reach a verdict),
    ``groups_split`` (the share of verify groups whose rewards are not all equal, the ones GRPO learns from), and
    the mean advantage of critiques whose verdict is right (``advantage_right``) and of those whose verdict is
    wrong (``advantage_wrong``; critiques without a verdict are in neither)."""
    roles, size = rollout.columns[ROLE_COLUMN], rollout.group_size
    rows = [i for i, role in enumerate(roles) if role == VERIFY]
    verdicts = {i: parse_verdict(rollout.completions[i]) for i in rows}
    right = [i for i in rows if verdicts[i] == rollout.columns[target_column][i]]
    wrong = [i for i in rows if verdicts[i] is not None and i not in set(right)]
    scores = rollout.rewards[reward]
    starts = range(rows[0], rows[-1] + 1, size)
    split = [len({float(scores[i]) for i in range(g, g + size)}) > 1 for g in starts]
    mean = lambda ids: float(rollout.advantages[ids].mean()) if ids else float("nan")  # noqa: E731
    return {
        "verdict_rate": sum(v is not None for v in verdicts.values()) / len(rows),
        "groups_split": sum(split) / len(split),
        "advantage_right": mean(right),
        "advantage_wrong": mean(wrong),
    }
