"""TurnSight's per-turn hindsight signal: the views a turn is scored under, the cross-horizon agreement, the
normalisation over sibling rollouts, and the sign-keeping advantage scale."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from stackrl.blocks.turns import Segment


def observations(completion_ids: Sequence[int], segments: Sequence[Segment]) -> list[list[int]]:
    """The tokens shown after each action: from the action's end to the next action's start (the last action's, to
    the completion's end; usually nothing)."""
    if not segments:
        return []
    ends = [s.start for s in segments[1:]] + [len(completion_ids)]
    return [list(completion_ids[s.end : end]) for s, end in zip(segments, ends, strict=True)]


def hindsight(shown: Sequence[Sequence[int]], turn: int, horizon: int) -> list[int]:
    """What followed action ``turn`` within ``horizon`` turns: the observations after actions ``turn`` to
    ``turn + horizon - 1``, in order (fewer where the episode ends first)."""
    return [t for ids in shown[turn : turn + horizon] for t in ids]


def teacher_context(prompt_ids: Sequence[int], before: Sequence[int], seen: Sequence[int], after: Sequence[int],
                    prefix: Sequence[int]) -> list[int]:
    """The teacher's context of a turn: the prompt, the hindsight in its template (``before`` + results +
    ``after``), then the row's own tokens up to the turn."""
    return [*prompt_ids, *before, *seen, *after, *prefix]


def view_signal(teacher: torch.Tensor, student: torch.Tensor) -> float:
    """One view's signal of a turn: the mean over the turn's tokens of ``log pi(a_t | hindsight, ...) -
    log pi(a_t | ...)``, the teacher's log-probs of the action against the student's."""
    return (teacher - student).mean().item()


def agreed(signals: Sequence[float]) -> float | None:
    """The turn's signal where every horizon's view points the same way (all positive or all negative): their
    mean; ``None`` (dropped) where they disagree or any is 0."""
    if all(s > 0 for s in signals) or all(s < 0 for s in signals):
        return sum(signals) / len(signals)
    return None


def group_normalized(values: Sequence[Sequence[float | None]], group_size: int, eps: float = 1e-6) -> list[list[float]]:
    """Each kept turn's signal as a z-score over the kept turns of its group's rows (the sibling rollouts of one
    prompt: mean, population std + ``eps``); a dropped turn, or a group with fewer than two kept turns, gets 0."""
    out = [[0.0] * len(row) for row in values]
    for start in range(0, len(values), group_size):
        kept = [(i, k, v) for i in range(start, start + group_size) for k, v in enumerate(values[i]) if v is not None]
        if len(kept) < 2:
            continue
        scores = torch.tensor([v for _, _, v in kept], dtype=torch.float64)
        z = (scores - scores.mean()) / (scores.std(unbiased=False) + eps)
        for (i, k, _), value in zip(kept, z.tolist()):
            out[i][k] = value
    return out


def scale(z: float, direction: torch.Tensor, alpha: float, band: float) -> torch.Tensor:
    """The factor on a turn's tokens: ``clip(1 + alpha * sign(A) * z, 1 - band, 1 + band)``, positive since
    ``band < 1``, so an advantage keeps its sign. Where the outcome is good, a turn its hindsight endorses more than
    its siblings' turns gets more credit; where bad, a turn its hindsight rejects more gets more blame."""
    return (1 + alpha * torch.sign(direction) * z).clamp(1 - band, 1 + band)
