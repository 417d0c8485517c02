"""SELFCI: complementary self-distillation toward the product of a utility teacher and a privacy teacher
(catalogue 001:137; arXiv 2605.20258)."""

from stackrl_selfci.config import SelfciConfig
from stackrl_selfci.loss import complementary_kl, product_of_experts
from stackrl_selfci.plugin import Selfci, complementary_divergence

__all__ = ["Selfci", "SelfciConfig", "complementary_divergence", "complementary_kl", "product_of_experts"]
