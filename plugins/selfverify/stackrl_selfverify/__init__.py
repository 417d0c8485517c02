"""Unified self-verification RL: the policy generates answers and verifies its own answers in one RL process,
rewarded for both by the rule-based verifier (000:159 of the method catalogue; code named in its abstract,
github.com/mansicer/self-verification, not available to us)."""

from stackrl_selfverify.plugin import SelfVerify, SelfVerifyConfig

__all__ = ["SelfVerify", "SelfVerifyConfig"]
