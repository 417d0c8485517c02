"""TRACE: token-routed self on-policy distillation ("Distilling Where It Matters via Token-Routed Self On-Policy
Alignment", arXiv 2605.10194)."""

from stackrl_trace.config import TraceConfig
from stackrl_trace.loss import kl_weight, scale_span_advantages, span_divergence, span_loss
from stackrl_trace.plugin import Trace
from stackrl_trace.spans import RowSpans, capped_positions, parse_annotation

__all__ = [
    "RowSpans",
    "Trace",
    "TraceConfig",
    "capped_positions",
    "kl_weight",
    "parse_annotation",
    "scale_span_advantages",
    "span_divergence",
    "span_loss",
]
