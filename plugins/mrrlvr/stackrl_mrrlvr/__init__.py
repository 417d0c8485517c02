"""MR-RLVR: Masked-and-Reordered RLVR ("Masked-and-Reordered Self-Supervision for Reinforcement Learning from
Verifiable Rewards", arXiv 2511.17473)."""

from stackrl_mrrlvr.config import MrrlvrConfig
from stackrl_mrrlvr.plugin import Mrrlvr
from stackrl_mrrlvr.tasks import fill_agreement, masked_solution, order_agreement, shuffled_solution

__all__ = ["Mrrlvr", "MrrlvrConfig", "fill_agreement", "masked_solution", "order_agreement", "shuffled_solution"]
