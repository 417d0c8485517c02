"""Privileged-teacher token signals: the sampled tokens scored under named contexts, once per batch, shared.

Methods that turn the gap between the policy and the same model shown privileged context (a reference solution,
a hint, an assertion that the answer is right or wrong) into per-token credit share this block:

- :class:`SignalContext` (with :data:`STUDENT`, :data:`REFERENCE`): what tokens are scored under;
  :mod:`stackrl.blocks.tokensignals.contexts` lists the derived fields templates may use (wrong hints, assertions);
- :class:`TokenSignals`: ``TokenSignals.of(ctx)`` scores each row once per distinct context and caches the result
  for every plugin of the stage: log-probs, gaps, contrasts, entropy and top-k mass;
- :func:`entropy_and_topk_mass`: per-position statistics computed a chunk of positions at a time;
- :mod:`stackrl.blocks.tokensignals.modulators`: signals into advantages (magnitude weights, budget-preserving
  reallocation, routing, gates), and the tokens a reshaping changed, reported as a plugin's activity;
- :class:`CollapseGate`: switches a term off once a batch statistic (a teacher's entropy) collapses; checkpointed;
- :class:`TeacherGapSettings`: the config piece of a method whose gap acts on the advantages or as a loss term.
"""

from stackrl.blocks.tokensignals.contexts import DERIVED_FIELDS, REFERENCE, STUDENT, SignalContext, derived_fields
from stackrl.blocks.tokensignals.gates import CollapseGate
from stackrl.blocks.tokensignals.modulators import (
    acted_on_tokens,
    bounded_weights,
    entropy_gate,
    inverse_sensitivity,
    linear_decay,
    magnitude_weights,
    mean_one,
    mixed,
    per_token,
    reallocate,
    reweight,
    route,
    sigmoid_gate,
)
from stackrl.blocks.tokensignals.service import TokenSignals
from stackrl.blocks.tokensignals.settings import TeacherGapSettings
from stackrl.blocks.tokensignals.statistics import entropy_and_topk_mass

__all__ = [
    "CollapseGate",
    "DERIVED_FIELDS",
    "REFERENCE",
    "STUDENT",
    "SignalContext",
    "TeacherGapSettings",
    "TokenSignals",
    "acted_on_tokens",
    "bounded_weights",
    "derived_fields",
    "entropy_and_topk_mass",
    "entropy_gate",
    "inverse_sensitivity",
    "linear_decay",
    "magnitude_weights",
    "mean_one",
    "mixed",
    "per_token",
    "reallocate",
    "reweight",
    "route",
    "sigmoid_gate",
]
