"""Octopus's reward of a row: its two attempts' shaped self-correction reward and their format."""

from __future__ import annotations

from stackrl_octopus.config import OctopusConfig


def correction_reward(first: bool | None, second: bool | None, identical: bool, config: OctopusConfig) -> float:
    """The reward of a row whose first and second attempts are right, wrong or unanswered (``None``), Eq. 6:
    ``(1 - w) r' + w f``, ``r'`` the shaped reward of the pair (an unanswered attempt is wrong), ``f`` 1 when both
    attempts state an answer. As in the authors' code, ``r'`` is capped at ``identical_cap`` when the attempts are
    the same text, at 0 when the first states no answer and at 0.5 when the second does not."""
    shaped = {
        (False, True): config.fix_reward,
        (True, True): config.keep_reward,
        (False, False): config.miss_reward,
        (True, False): config.break_reward,
    }[bool(first), bool(second)]
    if identical and config.identical_cap is not None:
        shaped = min(shaped, config.identical_cap)
    if first is None:
        shaped = min(shaped, 0.0)
    if second is None:
        shaped = min(shaped, 0.5)
    answered = float(first is not None and second is not None)
    return (1 - config.format_weight) * shaped + config.format_weight * answered
