"""ECHO: Entropy-Confidence Hybrid Optimization for Test-Time Reinforcement Learning (arXiv 2602.02150): its
policy update, the entropy-confidence hybrid advantage and the confidence-adaptive clip range."""

from stackrl_echo.plugin import Echo, EchoConfig

__all__ = ["Echo", "EchoConfig"]
