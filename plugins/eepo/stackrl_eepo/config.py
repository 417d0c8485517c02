"""Every setting of the EEPO plugin. The abstract fixes the two-stage rollout; the unlearning step's form is ours."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError

UNLEARNING = ("unlikelihood", "ascent")  # the objectives of stackrl.policy_ops that lower a likelihood


@dataclass
class EepoConfig:
    # The unlearning step, on a scratch copy of the policy: `steps` plain gradient steps of size `learning_rate` on
    # the first half's completions (all groups of the batch at once). unlikelihood descends -log(1 - p) per token:
    # bounded, strongest on the tokens the policy is surest of (its dominant mode). ascent descends log p: the
    # same push on every token, unbounded.
    objective: str = "unlikelihood"
    learning_rate: float = 0.05
    steps: int = 1
    # Adaptive, as the paper gates it: unlearn only while the mean of the last `entropy_window` steps' entropy
    # estimates (each the mean -log p of the tokens the first half sampled) lies below this; null: at every step.
    # Above it the policy explores already, and the second half is sampled from it unchanged. 0.3 over 3 steps are
    # the paper's values (its alpha and m).
    entropy_threshold: float | None = 0.3
    entropy_window: int = 3


def check(config: EepoConfig) -> None:
    """Refuse settings no run could use, naming the key."""
    if config.objective not in UNLEARNING:
        raise ConfigError(
            f"eepo.objective: must be one of {', '.join(UNLEARNING)} (an objective that lowers the first half's "
            f"likelihood), not {config.objective!r}"
        )
    if not config.learning_rate > 0:
        raise ConfigError(f"eepo.learning_rate: must be positive, not {config.learning_rate}")
    if config.steps < 1:
        raise ConfigError(f"eepo.steps: must be at least 1, not {config.steps}")
    if config.entropy_threshold is not None and not config.entropy_threshold > 0:
        raise ConfigError(f"eepo.entropy_threshold: must be positive or null, not {config.entropy_threshold}")
    if config.entropy_window < 1:
        raise ConfigError(f"eepo.entropy_window: must be at least 1 step, not {config.entropy_window}")
