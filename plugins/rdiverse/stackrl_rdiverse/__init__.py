"""R-Diverse for stackrl: a challenger rewarded for questions its solver splits on, penalised for the skills a
persistent memory of its earlier questions already holds."""

from stackrl_rdiverse.plugin import RDiverse, RDiverseConfig

__all__ = ["RDiverse", "RDiverseConfig"]
