"""SDAR: self-distilled agentic RL, its gated self-distillation term ("Self-Distilled Agentic Reinforcement
Learning", arXiv 2605.15155)."""

from stackrl_sdargate.plugin import SdarGate, SdarGateConfig, gated_distillation

__all__ = ["SdarGate", "SdarGateConfig", "gated_distillation"]
