"""SEAL's reward of a self-edit, from the downstream scores of the live policy and of the copy the edit updated,
and the ReST-EM rule that picks the self-edits its supervised phase fine-tunes on."""

from __future__ import annotations


def self_edit_rewards(baseline: list[float], adapted: list[float], kind: str) -> list[float]:
    """Each self-edit's reward: ``gain``, the updated copy's downstream score less the live policy's on the same
    question; ``improved``, 1.0 where that gain is positive, else 0.0 (the paper's binary reward)."""
    gains = [a - b for b, a in zip(baseline, adapted)]
    if kind == "gain":
        return gains
    if kind == "improved":
        return [float(g > 0) for g in gains]
    raise ValueError(f"unknown reward {kind!r}")


def kept_edits(gains: list[float | None], group_size: int, keep: int) -> list[int]:
    """The rows ReST-EM keeps: in each group (the self-edits of one prompt), the ``keep`` with the highest gain among
    those whose gain is positive, ties to the earlier row; ``None``, a row not scored, is never kept."""
    kept = []
    for start in range(0, len(gains), group_size):
        rows = [i for i in range(start, start + group_size) if gains[i] is not None and gains[i] > 0]
        kept += sorted(sorted(rows, key=lambda i: -gains[i])[:keep])
    return kept
