"""TRACE's numbers: the KL schedule, the routed span divergence, its normalisation, and the advantage scaling."""

from __future__ import annotations

import torch

from stackrl import Rollout
from stackrl.blocks.teacher import forward_kl, reverse_kl, score_student, score_teacher
from stackrl_trace.config import TraceConfig, teacher_template
from stackrl_trace.spans import KEY, RowSpans


def kl_weight(step: int, config: TraceConfig) -> float:
    """lambda at ``step``: ``w0`` during the warm-up, then a linear fall to 0 over ``decay_steps``."""
    if step < config.warmup_steps:
        return config.w0
    if config.decay_steps == 0:
        return 0.0
    return config.w0 * max(0.0, 1.0 - (step - config.warmup_steps) / config.decay_steps)


def span_mask(spans: list[RowSpans | None], width: int) -> torch.Tensor:
    """``(N, width)`` boolean mask of every row's span tokens."""
    mask = torch.zeros(len(spans), width, dtype=torch.bool)
    for row, row_spans in enumerate(spans):
        if row_spans is not None:
            mask[row, row_spans.positions] = True
    return mask


def scale_span_advantages(
    advantages: torch.Tensor, spans: list[RowSpans | None], width: int, lam: float, w0: float
) -> torch.Tensor:
    """Per-token advantages ``(N, width)``: the span tokens' scaled by ``1 - lam / w0``, the others kept.

    ``advantages`` is ``(N,)`` (one per sample, spread over the tokens) or already ``(N, width)``.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1).expand(-1, width)
    return torch.where(span_mask(spans, width), advantages * (1.0 - lam / w0), advantages)


def routed_divergence(student: torch.Tensor, teacher: torch.Tensor, is_key: torch.Tensor, clip) -> torch.Tensor:
    """Per-position divergence of packed ``(P, V)`` rows: forward KL where ``is_key``, reverse KL elsewhere."""
    out = student.new_zeros(student.size(0))
    out = out.index_put((is_key.nonzero().flatten(),), forward_kl(student[is_key], teacher[is_key], clip))
    return out.index_put(((~is_key).nonzero().flatten(),), reverse_kl(student[~is_key], teacher[~is_key], clip))


def span_divergence(scorer, rollout: Rollout, spans: list[RowSpans], config: TraceConfig, *, teacher: str, grad: bool):
    """The clipped divergence at every span token of ``rollout`` (one ``RowSpans`` per row), packed ``(P,)``.

    ``scorer`` is anything with ``score`` (a hook's ``ctx``); ``teacher`` the model to score the teacher with.
    Only span positions reach the vocabulary projection, for teacher and student alike.
    """
    common = dict(
        positions=[s.positions for s in spans], rollout=rollout, full_vocab=True, temperature=config.temperature
    )
    where = "trace.teacher_template" if config.teacher_template else f"trace.teacher_context ({config.teacher_context})"
    teacher_logps = score_teacher(
        scorer, teacher_template(config), model=teacher, where=where,
        extra_columns={"label": [s.label for s in spans]}, **common,
    ).vocab_logprobs
    student_logps = score_student(scorer, grad=grad, **common).vocab_logprobs
    # Packed rows come row by row, positions ascending: the order spans already hold them in.
    is_key = torch.tensor([s.kind == KEY for s in spans for _ in s.positions], device=student_logps.device)
    return routed_divergence(student_logps, teacher_logps, is_key, config.kl_clip)


def span_loss(divergence: torch.Tensor, spans: list[RowSpans], lengths: list[int], batch_rows: int) -> torch.Tensor:
    """Each row's span divergence as the paper normalises it, averaged over the micro-batch's ``batch_rows``.

    Per row and span branch: the mean over the span's tokens times ``|S| / |y|``, i.e. the sum over the span
    divided by the response length; rows without spans count as zero.
    """
    row_of = torch.tensor([r for r, s in enumerate(spans) for _ in s.positions], device=divergence.device)
    per_row = divergence.new_zeros(len(spans)).index_add(0, row_of, divergence)
    return (per_row / torch.tensor(lengths, dtype=divergence.dtype, device=divergence.device)).sum() / batch_rows
