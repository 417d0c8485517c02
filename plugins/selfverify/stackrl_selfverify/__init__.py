"""Unified self-verification RL: the policy generates answers and verifies its own answers in one RL process,
rewarded for both by the rule-based verifier (000:159 of the method catalogue; code named in its abstract,
github.com/mansicer/self-verification, not available to us)."""

from stackrl_selfverify.plugin import SelfVerify, SelfVerifyConfig
from stackrl_selfverify.voting import verification_weighted_vote

__all__ = ["SelfVerify", "SelfVerifyConfig", "verification_weighted_vote"]
