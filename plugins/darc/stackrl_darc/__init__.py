"""The stackrl plugin `darc`: DARC's asymmetric self-distillation (a document-augmented teacher labels the solver)."""

from stackrl_darc.plugin import Darc, DarcConfig

__all__ = ["Darc", "DarcConfig"]
