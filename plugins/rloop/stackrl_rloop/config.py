"""Every setting of the RLoop plugin. The abstract gives the loop; the numbers here are ours, for the built-in task."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError


@dataclass
class RloopConfig:
    # RL steps per iteration; at the end of each, the iteration's start is fine-tuned on what it collected.
    iteration_steps: int = 10
    # A trajectory succeeds where this reward component reaches success_threshold.
    reward: str = "exact_match"
    success_threshold: float = 1.0
    # Hard problems only (the paper's active learning): a group's successes are kept only where at most this share
    # of the group succeeded. 1.0 keeps every success. Each distinct successful completion of a prompt is kept once.
    max_pass_rate: float = 0.5
    # The rejection-sampling fine-tuning: constant learning rate, passes over the buffer, pairs per optimizer step
    # on each process (null: trainer.per_device_train_batch_size).
    rft_learning_rate: float = 1.0e-3
    rft_epochs: int = 2
    rft_batch_size: int | None = None


def check(config: RloopConfig) -> None:
    """Refuse settings no run could use, naming the key."""
    if config.iteration_steps < 1:
        raise ConfigError(f"rloop.iteration_steps: must be at least 1, not {config.iteration_steps}")
    if not 0.0 < config.max_pass_rate <= 1.0:
        raise ConfigError(f"rloop.max_pass_rate: must lie in (0, 1], not {config.max_pass_rate}")
    if not config.rft_learning_rate > 0:
        raise ConfigError(f"rloop.rft_learning_rate: must be positive, not {config.rft_learning_rate}")
    if config.rft_epochs < 1:
        raise ConfigError(f"rloop.rft_epochs: must be at least 1, not {config.rft_epochs}")
    if config.rft_batch_size is not None and config.rft_batch_size < 1:
        raise ConfigError(f"rloop.rft_batch_size: must be at least 1 or null, not {config.rft_batch_size}")
