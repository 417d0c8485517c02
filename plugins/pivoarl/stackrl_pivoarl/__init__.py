"""PivoARL for stackrl: failed attempts retried from their pivotal step, the correct prefix kept, and the credit
split at the pivot ("Agent Reinforcement Learning via Pivotal-Aware Self-Feedback Retry", arXiv 2607.03702)."""

from stackrl_pivoarl.config import PivoarlConfig
from stackrl_pivoarl.credit import pivotal_credit
from stackrl_pivoarl.plugin import Pivoarl

__all__ = ["Pivoarl", "PivoarlConfig", "pivotal_credit"]
