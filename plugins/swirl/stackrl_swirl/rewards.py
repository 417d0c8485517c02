"""SWIRL's two rewards: the frozen opposite model's log-probability of what the data says, given the live model's
generation (Qiu et al., "Self-Improving World Modelling with Latent Actions", arXiv 2602.06130).

- Forward phase (variational information maximisation): the forward model P(Y|X,Z) writes a next state Y' from
  state X and action Z; its reward is log Q(Z | X, Y'), the frozen inverse model's log-probability of the true
  action given the generated next state.
- Inverse phase (ELBO maximisation): the inverse model Q(Z|X,Y) writes an action Z' from X and the true next state
  Y; its reward is log P(Y | X, Z'), the frozen forward model's log-probability of the true next state.

Both log-probabilities are per-token means over the target's tokens and its end of sequence, floored (the authors'
reward modules).
"""

from __future__ import annotations

import torch

from stackrl.tasks.transitions import forward_prompt, inverse_prompt

FORWARD, INVERSE = "forward", "inverse"


def phase_at(step: int, phase_steps: int, first: str) -> str:
    """The phase optimizer step ``step`` (0-based, as the sample stage's ``ctx.step``) trains."""
    other = INVERSE if first == FORWARD else FORWARD
    return first if (step // phase_steps) % 2 == 0 else other


def generation_prompt(phase: str, state: str, action: str, following: str) -> str:
    """What the live model is asked in ``phase`` about the transition (state, action, next state)."""
    return forward_prompt(state, action) if phase == FORWARD else inverse_prompt(state, following)


def opposite_query(phase: str, state: str, generated: str, target: str) -> str:
    """The frozen opposite model's context for a row of ``phase``: the inverse prompt with the generated next state
    (whose continuation is the true action), or the forward prompt with the generated action (continuation: the
    true next state)."""
    generated = generated.strip()
    return inverse_prompt(state, generated) if phase == FORWARD else forward_prompt(state, generated)


def mean_logprob(logprobs: torch.Tensor, mask: torch.Tensor, floor: float) -> torch.Tensor:
    """Each row's mean log-probability over its masked tokens, ``(N,)``, no lower than ``floor``."""
    mask = mask.to(logprobs.dtype)
    mean = (logprobs * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return mean.clamp(min=floor)
