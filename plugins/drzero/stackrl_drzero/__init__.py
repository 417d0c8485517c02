"""Dr. Zero for stackrl: HRPO, the hop-grouped baseline of arXiv 2601.07055."""

from stackrl_drzero.baseline import cluster_advantages, pooled_rows
from stackrl_drzero.clusters import cluster_keys, operators
from stackrl_drzero.config import DrzeroConfig
from stackrl_drzero.plugin import Drzero

__all__ = ["Drzero", "DrzeroConfig", "cluster_advantages", "cluster_keys", "operators", "pooled_rows"]
