"""B-STaR: Monitoring and Balancing Exploration and Exploitation in Self-Taught Reasoners (arXiv 2412.17256): its
balance score choosing the sampling temperature and the reward threshold."""

from stackrl_bstar.balance import Candidate, balance_score, best_temperature, best_threshold, query_balance
from stackrl_bstar.config import BStarConfig
from stackrl_bstar.plugin import BStar

__all__ = ["BStar", "BStarConfig", "Candidate", "balance_score", "best_temperature", "best_threshold",
           "query_balance"]
