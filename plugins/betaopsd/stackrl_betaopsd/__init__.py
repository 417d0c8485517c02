"""beta-OPSD: on-policy self-distillation toward the KL-regularised optimum between a reference policy and the
privileged teacher (catalogue 001:161; no arXiv id found)."""

from stackrl_betaopsd.config import BetaOpsdConfig
from stackrl_betaopsd.loss import trajectory_divergence
from stackrl_betaopsd.plugin import BetaOpsd, target_divergence

__all__ = ["BetaOpsd", "BetaOpsdConfig", "target_divergence", "trajectory_divergence"]
