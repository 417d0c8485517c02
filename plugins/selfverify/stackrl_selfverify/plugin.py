"""Self-verification RL: RISE's two roles with the rule-based verifier's plain 1/0 as the reward of both.

The rollout is RISE's (:mod:`stackrl_rise`): solve groups answer, verify groups judge one on-policy attempt each.
What differs is the reward: an answer earns 1 when the verifier accepts it and 0 otherwise; a verification earns
1 when its verdict agrees with the verifier and 0 otherwise (a missing verdict included). At inference the same
policy weighs its answers by its own verdicts: ``stackrl eval`` with ``eval.verify_vote`` reports that vote
(:func:`stackrl.evaluation.verification_weighted_vote`) beside the plain majority.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl_rise import Rise, RiseConfig


@dataclass
class SelfVerifyConfig(RiseConfig):
    verify_share: float = 0.5  # generation and verification trained side by side, half the groups each
    section: ClassVar[str] = "selfverify"
    # The plain 1/0 rewards: RISE's 1 for a right answer (`correct`) and for an agreeing verdict (`agree`), and 0,
    # not its penalties, for all else.
    wrong: float = 0.0
    unanswered: float = 0.0
    disagree: float = 0.0
    no_verdict: float = 0.0
    min_critique_chars: int = 0  # the paper scores the verdict alone


class SelfVerify(Rise):
    Config = SelfVerifyConfig
    activity = "groups verified an on-policy attempt"
