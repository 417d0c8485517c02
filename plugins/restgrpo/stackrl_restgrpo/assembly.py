"""ReST-GRPO's data rules: which groups' problems to keep, and the partial-solution problems a kept one gives."""

from __future__ import annotations

import math
import random

import torch

from stackrl.blocks.roles import reset_prompt, split_steps


def group_spread(rewards: torch.Tensor) -> float:
    """The population standard deviation of a group's rewards, unscored (NaN) ones left out; 0 when none is scored."""
    scored = rewards[~rewards.isnan()].double()
    return float(scored.std(correction=0)) if scored.numel() else 0.0


def prefix_weights(count: int, alpha: float) -> list[float]:
    """The draw weight of the prefixes of 1, 2, ..., ``count`` lines: ``alpha^(k-1)``, short prefixes first."""
    return [alpha**k for k in range(count)]


def partial_prompts(prompt: str, completion: str, ratio: float, alpha: float, rng: random.Random) -> list[str]:
    """``ceil(ratio x lines)`` prompts, drawn with replacement: ``prompt`` followed by the first k lines of
    ``completion``, ``k`` of 1 .. lines - 1 with weight ``alpha^(k-1)``. The last line (the final answer) is never
    given: the reward reads the answer from the completion alone."""
    steps = split_steps(completion.rstrip() + "\n")
    if len(steps) < 2 or ratio == 0:
        return []
    lengths = rng.choices(range(1, len(steps)), weights=prefix_weights(len(steps) - 1, alpha),
                          k=math.ceil(ratio * len(steps)))
    return [reset_prompt(prompt, steps, k) for k in lengths]
