"""UCOB: Learning to Utilize and Evolve Agentic Skills via Credit-Aware On-Policy Bidirectional Self-Distillation."""

from stackrl_ucob.plugin import Ucob, UcobConfig

__all__ = ["Ucob", "UcobConfig"]
