"""stackrl: RL post-training methods for language models as plugins, stacked on TRL's GRPOTrainer."""

from stackrl.cpu import bound_idle_spinning

# Before torch is imported: OpenMP reads its settings once, when torch loads it.
bound_idle_spinning()

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
from stackrl.plugin import NoConfig, Plugin, RunFacts
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
    "RunFacts",
    "Rollout",
    "SampleContext",
    "Samples",
    "Scores",
    "StackrlError",
    "StepContext",
    "hookimpl",
]
