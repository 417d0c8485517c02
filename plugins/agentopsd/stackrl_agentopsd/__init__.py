"""AgentOPSD: recursive turn-level credit from a privileged self-teacher ("AgentOPSD: Recursive Self-Distillation
for Agentic Reinforcement Learning", arXiv 2608.05987)."""

from stackrl_agentopsd.belief import beliefs, revisions, token_weights, turn_evidence, turn_scores
from stackrl_agentopsd.plugin import AgentOpsd, AgentOpsdConfig

__all__ = ["AgentOpsd", "AgentOpsdConfig", "beliefs", "revisions", "token_weights", "turn_evidence", "turn_scores"]
