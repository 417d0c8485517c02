"""Roles: the group slots of a batch given to different jobs, prompts derived from on-policy first turns, and
advantages normalised per role group or per segment of a completion.

A ``generate_rollout`` plugin gives each group a role (:func:`assign_roles`), samples what a derived role needs
with ``ctx.generate`` (a first attempt to verify, retry or reset from), builds the derived prompt with the helpers
here, and returns the role of every row in the column :data:`stackrl.rewards.ROLE_COLUMN` of its ``Samples``. The
host's built-in outcome rewards then score only the rows whose role answers the question
(:data:`stackrl.rewards.SOLUTION_ROLES`); the plugin scores the others. The role names live with the outcome rewards,
which read them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import torch

from stackrl.errors import ConfigError, PluginError
from stackrl.tasks import judge_prompt

def assign_roles(num_groups: int, fractions: dict[str, float], *, key: str) -> list[str]:
    """The role of each of ``num_groups`` groups, by the share ``fractions`` gives each role.

    Counts are rounded by largest remainder (ties go to the role named first), so they always add up to
    ``num_groups``; roles come in blocks, in the order of ``fractions``. ``key`` is the config key that set the
    fractions, named in the error when they are not positive shares summing to 1.
    """
    if not fractions or any(not f > 0 for f in fractions.values()):
        raise ConfigError(f"{key}: give each role a positive share of the groups, not {dict(fractions)}")
    if not math.isclose(sum(fractions.values()), 1.0, abs_tol=1e-6):
        raise ConfigError(f"{key}: role shares must sum to 1, not {sum(fractions.values()):g}")
    exact = {role: share * num_groups for role, share in fractions.items()}
    counts = {role: math.floor(x) for role, x in exact.items()}
    by_remainder = sorted(fractions, key=lambda role: -(exact[role] - counts[role]))  # stable: named first wins ties
    for role in by_remainder[: num_groups - sum(counts.values())]:
        counts[role] += 1
    return [role for role in fractions for _ in range(counts[role])]


def rows_of_groups(group_roles: Sequence[str], group_size: int) -> list[str]:
    """Each row's role, from each group's."""
    return [role for role in group_roles for _ in range(group_size)]


def first_turns(prompts: list, group_roles: Sequence[str], roles, ctx, samples: int = 1) -> dict[int, list]:
    """On-policy first turns for the groups whose role is in ``roles``: ``samples`` completions of each such
    group's own prompt, as ``{group: [Generation, ...]}``, sampled in one ``ctx.generate`` call (the same call on
    every process, so every process derives the same prompts from them)."""
    size = len(prompts) // len(group_roles)
    groups = [g for g, role in enumerate(group_roles) if role in roles]
    generations = ctx.generate([prompts[g * size] for g in groups for _ in range(samples)])
    return {g: generations[k * samples : (k + 1) * samples] for k, g in enumerate(groups)}


def judged_attempt_rows(prompts: list, group_roles: Sequence[str], role: str, ctx) -> tuple[dict[int, str], list]:
    """The rows of a batch in which the groups of ``role`` judge one on-policy attempt each: an attempt at each such
    group's question (:func:`first_turns`), then one generation a row, the groups of ``role`` from the judge prompt
    of their attempt (:func:`stackrl.tasks.judge_prompt`), the others from their own prompt. Returns the attempts,
    ``{group: text}``, and the generations of every row (rise's verify groups, comas's critique groups)."""
    size = len(prompts) // len(group_roles)
    attempts = {g: tries[0].text for g, tries in first_turns(prompts, group_roles, {role}, ctx).items()}
    rows = [judge_prompt(text_prompt(prompt, role=role), attempts[i // size]) if i // size in attempts else prompt
            for i, prompt in enumerate(prompts)]
    return attempts, ctx.generate(rows)


def text_prompt(prompt, *, role: str):
    """``prompt`` if it is text; derived prompts extend text, so chat messages are refused naming the role."""
    if not isinstance(prompt, str):
        raise PluginError(f"role '{role}' derives its prompts from text prompts; set data.chat: false")
    return prompt


def split_steps(text: str) -> list[str]:
    """A completion's steps: its lines, each with its line break, so ``"".join`` gives the text back."""
    return text.splitlines(keepends=True)


# A reset chooser picks the step of a failed attempt to start again from: ``(steps, rng) -> index or None``, where
# ``None`` means the attempt offers no reset point. Steps before the index are kept as the prefix; the step at the
# index and everything after it are generated again.
ResetChooser = Callable[[list[str], random.Random], "int | None"]


def uniform_reset(steps: list[str], rng: random.Random) -> int | None:
    """Any reasoning step after the first, uniformly: the last line (the final answer) is never reset, and the
    first never either, since its empty prefix would be a fresh attempt labelled a reset. ``None`` below two
    reasoning steps."""
    return rng.randrange(1, len(steps) - 1) if len(steps) > 2 else None


def reset_prompt(prompt: str, steps: list[str], index: int) -> str:
    """The prompt followed by the attempt's steps before ``index``: a continuation of it starts at that step."""
    return prompt + "".join(steps[:index])


def group_advantages(rewards: torch.Tensor, group_size: int, roles: Sequence[str], *, scale: str = "group"):
    """GRPO advantages with every normalisation inside a role: ``(N,)`` from ``(N,)`` rewards.

    Each group is centred on its own mean; ``scale`` divides by the group's std (``"group"``), by the std of all
    rows of the group's role (``"batch"``, TRL's batch scaling taken per role), or not at all (``"none"``). A group
    must hold one role. NaN rewards (rows no component scored) get advantage 0 and stay out of the statistics.
    """
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be 'group', 'batch' or 'none', not {scale!r}")
    groups = rewards.view(-1, group_size)
    group_roles = [roles[i] for i in range(0, len(roles), group_size)]
    if any(len(set(roles[i : i + group_size])) > 1 for i in range(0, len(roles), group_size)):
        raise PluginError("group_advantages: a group holds rows of several roles")
    scored = ~torch.isnan(groups)
    filled = torch.where(scored, groups, torch.zeros_like(groups))
    counts = scored.sum(1, keepdim=True).clamp(min=1)
    centred = torch.where(scored, groups - filled.sum(1, keepdim=True) / counts, torch.zeros_like(groups))
    if scale == "group":
        std = ((centred**2).sum(1, keepdim=True) / (counts - 1).clamp(min=1)).sqrt()
    elif scale == "batch":
        std = torch.empty(len(group_roles), 1)
        for role in set(group_roles):
            mine = torch.tensor([r == role for r in group_roles])
            values = groups[mine][scored[mine]]
            std[mine] = values.std() if values.numel() > 1 else 0.0
    else:
        return centred.flatten()
    return (centred / (std + 1e-4)).flatten()


def broadcast_segments(values: Sequence[Sequence[float]], spans, width: int) -> torch.Tensor:
    """``(N, width)`` per-token advantages: each row's segment ``k`` (token span ``spans[i][k] = (start, end)``,
    end exclusive) gets ``values[i][k]``; tokens outside every span (injected text) get 0."""
    out = torch.zeros(len(values), width)
    for row, (row_values, row_spans) in enumerate(zip(values, spans, strict=True)):
        for value, (start, end) in zip(row_values, row_spans, strict=True):
            out[row, start:end] = value
    return out
