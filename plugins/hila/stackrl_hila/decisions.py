"""The inner loop's rule: what a completion decides and what the decision earns.

On the built-in task a completion is the policy's check of its own attempt in the judge format; its verdict is the
decision: "correct" keeps the attempt (the agent solves the problem itself), "wrong" defers the problem to the
expert, and a reply without a verdict keeps the attempt (the authors score an action they cannot read as an answer
of its own). The cost-aware reward (the authors' ``1[correct] - lambda_defer * 1[DEFER]``):

    kept attempt:  1 if the attempt is right, else 0
    deferral:      1 if the expert's solution is right, else 0, minus ``cost``

so with a right expert and ``0 < cost < 1`` a right solve beats a deferral, which beats a wrong solve.
"""

from __future__ import annotations

from stackrl.tasks import parse_verdict


def deferred(reply: str) -> bool:
    """Whether a decision reply defers to the expert: its verdict is "wrong"."""
    return parse_verdict(reply) is False


def cost_aware_reward(defers: bool, attempt_right: bool, expert_right: bool, cost: float) -> float:
    """One row's reward: the expert's correctness less the cost where it defers, the attempt's correctness where not."""
    return float(expert_right) - cost if defers else float(attempt_right)


def learns_from(defers: bool, attempt_right: bool, which: str) -> bool:
    """Whether the row's problem feeds the supervised phase: a deferred one ("deferred"), or also one whose kept
    attempt was wrong ("deferred_and_failed")."""
    return defers or (which == "deferred_and_failed" and not attempt_right)
