"""Fine-tuning pairs a method collects from its RL steps, and the supervised phases it runs on them every few steps.

InT fine-tunes on the interventions its filter kept, HILA on the expert's solutions of the problems its policy
deferred: each collects (context, target ids) pairs after every step, each pair once, and every ``every`` steps
restarts the policy with a supervised phase on the pairs collected since the last one (``ctx.supervised_phase``),
then empties them. :class:`SupervisedSettings` holds the keys of such a phase, for a plugin's config to inherit;
:class:`SupervisedPairs` the pairs, the phase and the state a resume needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl.errors import ConfigError


@dataclass
class SupervisedSettings:
    """The keys of a plugin's supervised phases, for its config to inherit beside its other pieces: every this many
    RL steps, a phase on the pairs collected since the last (RL then resumes with a fresh optimizer and schedule).
    A subclass may give other defaults; its ``check`` calls :meth:`check_supervised` with its section."""

    every: int = 10
    sft_learning_rate: float = 1.0e-4
    sft_epochs: int = 2
    sft_batch_size: Optional[int] = None  # pairs per optimizer step on each process; null: per_device_train_batch_size

    def check_supervised(self, section: str) -> None:
        """Refuse the phase's settings that no run could use, naming ``<section>.<key>``."""
        for key in ("every", "sft_epochs"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{section}.{key}: must be at least 1, not {getattr(self, key)}")
        if not self.sft_learning_rate > 0:
            raise ConfigError(f"{section}.sft_learning_rate: must be positive, not {self.sft_learning_rate}")
        if self.sft_batch_size is not None and self.sft_batch_size < 1:
            raise ConfigError(f"{section}.sft_batch_size: must be at least 1 or null, not {self.sft_batch_size}")


class SupervisedPairs:
    """The (context, target ids) pairs collected since the last phase, each once: a context is a prompt's text or
    token ids. With ``once_per_context`` a context keeps its first target (HILA asks the expert once per problem);
    otherwise each distinct pair is kept."""

    def __init__(self, phase: str, once_per_context: bool = False):
        self.phase = phase  # the phase's name in the logs: phase/<phase>/...
        self.once_per_context = once_per_context
        self.pairs: list[tuple] = []

    def __len__(self) -> int:
        return len(self.pairs)

    def add(self, context, target_ids) -> bool:
        """Keep the pair unless it (or, with ``once_per_context``, its context) is kept already; whether it was."""
        key = self._key(context, target_ids)
        if any(self._key(*pair) == key for pair in self.pairs):
            return False
        self.pairs.append((context, list(target_ids)))
        return True

    def _key(self, context, target_ids) -> tuple:
        context = context if isinstance(context, str) else tuple(context)
        return (context,) if self.once_per_context else (context, tuple(target_ids))

    def phase_due(self, ctx, settings: SupervisedSettings, nothing: str) -> None:
        """In ``post_step``: at every ``settings.every``-th step, log how many pairs there are and fine-tune on
        them, then empty them; with none, warn ``nothing`` (a count the host reports) and leave the policy as is."""
        if ctx.step % settings.every:
            return
        ctx.log("pairs", len(self.pairs))
        if not self.pairs:
            ctx.warn(nothing)
            return
        ctx.supervised_phase(self.phase, [c for c, _ in self.pairs], [t for _, t in self.pairs],
                             learning_rate=settings.sft_learning_rate, epochs=settings.sft_epochs,
                             batch_size=settings.sft_batch_size)
        self.pairs = []

    def state_dict(self) -> dict:
        return {"buffer": [[c if isinstance(c, str) else list(c), list(t)] for c, t in self.pairs]}

    def load_state_dict(self, state: dict) -> None:
        self.pairs = [(c if isinstance(c, str) else list(c), list(t)) for c, t in state["buffer"]]
