"""Verification-weighted voting: the policy's answers, each counted only where the policy judged it correct."""

from __future__ import annotations

from collections import Counter


def verification_weighted_vote(answers: list, verdicts: list) -> str | None:
    """The final answer most of the samples judged correct agree on; with no sample judged correct, the plain
    majority. ``answers`` are final answers (``None``: none), ``verdicts`` the policy's verdict on each sample
    (True correct, False wrong, None none). Ties go to the answer seen first."""
    accepted = [a for a, verdict in zip(answers, verdicts, strict=True) if a is not None and verdict is True]
    pool = accepted or [a for a in answers if a is not None]
    if not pool:
        return None
    votes = Counter(pool)
    return max(votes, key=lambda a: (votes[a], -pool.index(a)))
