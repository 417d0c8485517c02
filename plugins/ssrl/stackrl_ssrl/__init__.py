"""SSRL: Self-Search Reinforcement Learning (arXiv 2508.10874): the self-search prompt, the format and exact-match
reward, and the information the policy writes kept out of the loss."""

from stackrl_ssrl.plugin import SSRL, SSRLConfig

__all__ = ["SSRL", "SSRLConfig"]
