"""stackrl: RL post-training methods for language models as plugins, stacked on TRL's GRPOTrainer."""

import os

# Idle threads of torch's OpenMP pool sleep rather than spin (stackrl.cpu says why). Set before torch is imported:
# OpenMP reads it once, when torch loads it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from stackrl.context import (
    AdvantageContext,
    LossContext,
    RewardContext,
    Rollout,
    SampleContext,
    Samples,
    StepContext,
)
from stackrl.errors import ConfigError, PluginError, PluginHookError, StackrlError
from stackrl.hookspecs import hookimpl
from stackrl.plugin import NoConfig, Plugin
from stackrl.policy import Generation, Scores

__version__ = "0.1.0"

__all__ = [
    "AdvantageContext",
    "ConfigError",
    "Generation",
    "LossContext",
    "NoConfig",
    "Plugin",
    "PluginError",
    "PluginHookError",
    "RewardContext",
    "Rollout",
    "SampleContext",
    "Samples",
    "Scores",
    "StackrlError",
    "StepContext",
    "hookimpl",
]
