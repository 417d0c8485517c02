"""OSFT for stackrl: online supervised fine-tuning on the policy's own colder samples (arXiv 2510.18814)."""

from stackrl_osft.config import OsftConfig
from stackrl_osft.plugin import Osft

__all__ = ["Osft", "OsftConfig"]
