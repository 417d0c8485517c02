"""H²SD: hybrid hindsight self-distillation."""

from stackrl_h2sd.plugin import H2sd, H2sdConfig, success_advantages

__all__ = ["H2sd", "H2sdConfig", "success_advantages"]
