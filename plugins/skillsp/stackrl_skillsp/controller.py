"""The skill controller's rule: each skill's solve rate from the solver's outcomes, how informative that rate is,
the skill's running utility, and the weights the next problems' skills are drawn with."""

from __future__ import annotations

from stackrl.blocks.selfplay import uncertainty_reward


def solve_rates(skills: list, solved: list[bool]) -> dict:
    """Each skill's share of solved attempts in one batch (rows without a skill, ``None``, are left out)."""
    attempts, wins = {}, {}
    for skill, ok in zip(skills, solved, strict=True):
        if skill is None:
            continue
        attempts[skill] = attempts.get(skill, 0) + 1
        wins[skill] = wins.get(skill, 0) + int(bool(ok))
    return {skill: wins[skill] / attempts[skill] for skill in attempts}


def informativeness(rate: float) -> float:
    """``1 - |2p - 1|`` of a solve rate ``p``: 1 at an even split, 0 for a skill whose tasks were all solved or
    all failed (GRPO learns nothing from either); the self-play block's uncertainty reward."""
    return uncertainty_reward(rate)


def updated_utility(utility: float, rate: float, alpha: float) -> float:
    """``u <- (1 - alpha) u + alpha * informativeness(p)``: the skill's running utility after one batch."""
    return (1.0 - alpha) * utility + alpha * informativeness(rate)


def sampling_weights(utilities: dict, floor: float) -> dict:
    """The probability of drawing each skill: ``(u_s + floor) / sum_k (u_k + floor)``; ``floor`` keeps every skill
    drawable, so a skill that was uninformative is tried again."""
    total = sum(u + floor for u in utilities.values())
    if total <= 0:
        return {skill: 1.0 / len(utilities) for skill in utilities}
    return {skill: (u + floor) / total for skill, u in utilities.items()}
