"""SPEAR's curriculum: an intrinsic tool-call reward whose weight falls on a cosine, and a self-imitation
coefficient that rises on one (the authors' `use_toolcall_reward: cosine` and `max_replay_loss_steps`)."""

from __future__ import annotations

import math
import re


def tool_calls(text: str, pattern: re.Pattern) -> int:
    """The tool calls a completion writes: the matches of ``pattern`` (``<calc>..</calc>`` on the built-in task)."""
    return len(pattern.findall(text))


def tool_call_reward(calls: int, per_call: float, cap: float) -> float:
    """``per_call`` for each tool call, at most ``cap`` (the authors': 0.1 a call, at most 1.0)."""
    return min(per_call * calls, cap)


def falling(step: int, steps: int) -> float:
    """The tool reward's weight at ``step``: (cos(pi step / steps) + 1) / 2 from 1 at step 0 to 0 at ``steps``, 0
    after."""
    if step >= steps:
        return 0.0
    return (math.cos(math.pi * step / steps) + 1.0) / 2.0


def rising(step: int, steps: int) -> float:
    """The imitation coefficient's share at ``step``: 1 - falling, from 0 at step 0 to 1 at ``steps``, 1 after;
    ``steps`` 0 holds it at 1 from the start."""
    return 1.0 if steps == 0 else 1.0 - falling(step, steps)


def falling_schedule(steps: int) -> dict[int, float]:
    """``falling`` as a reward-weight schedule ``{step: weight}`` (stackrl.weights), one key per step to ``steps``."""
    return {step: round(falling(step, steps), 6) for step in range(steps + 1)}
