"""Every setting of the OSFT plugin, with the authors' values as defaults."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError


@dataclass
class OsftConfig:
    # tau_s: the temperature the completions are sampled at (the authors' 0.6). The loss reads them at the run's
    # trainer.temperature (tau_t, the authors' 1.0): sampling below it is what makes the method work; equal
    # temperatures are the authors' ablation, where the expected update is zero.
    sampling_temperature: float = 0.6


def check(config: OsftConfig) -> None:
    """Refuse settings no run could use, naming the key (the host has already checked the types)."""
    if not config.sampling_temperature > 0:
        raise ConfigError(
            f"osft.sampling_temperature: must be positive, not {config.sampling_temperature} "
            "(greedy decoding gives every prompt's group one completion, repeated)"
        )
