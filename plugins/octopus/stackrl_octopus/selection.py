"""Which recombined pairs fill a group: the rows that balance its positives and negatives.

A pair ``(i, j)`` is the first attempt of the group's sampled row ``i`` followed by the second attempt of its sampled
row ``j``; ``(i, i)`` is row ``i`` as sampled. A pair is positive when its second attempt is right (wrong -> right,
right -> right), negative when it is wrong (right -> wrong, wrong -> wrong), as its shaped reward says.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

FIX, KEEP, BREAK, MISS = "wrong->right", "right->right", "right->wrong", "wrong->wrong"
KINDS = {(False, True): FIX, (True, True): KEEP, (True, False): BREAK, (False, False): MISS}


def pools(first: Sequence[bool | None], second: Sequence[bool | None], *, same_row: bool) -> dict[str, list]:
    """Every pair of an answered first attempt and an answered second one (``None``: no answer, never paired) by its
    kind; ``same_row`` keeps the pairs ``(i, i)``."""
    found: dict[str, list] = {kind: [] for kind in KINDS.values()}
    for i, a in enumerate(first):
        for j, b in enumerate(second):
            if a is not None and b is not None and (same_row or i != j):
                found[KINDS[a, b]].append((i, j))
    return found


def select_pairs(first: Sequence[bool | None], second: Sequence[bool | None], extra: int, group_size: int,
                 rule: str, rng: random.Random) -> list[tuple[int, int]]:
    """The ``extra`` pairs added to a group of ``group_size`` rows whose sampled rows' attempts were judged
    ``first[i]`` and ``second[i]`` (right, wrong, or ``None`` without an answer).

    ``rule="code"`` (the authors' code): with ``k`` sampled rows right in the end and ``h = (n - k) // 2``, up to
    ``h`` wrong -> right pairs, up to ``h`` right -> right, then one right -> wrong, wrong -> wrong ones, more
    right -> wrong ones, the positives left over; every pair ``(i, j)`` is a candidate.

    ``rule="paper"`` (Algorithm 1): pairs with ``j != i``; up to ``group_size / 2 - k`` positives, wrong -> right
    first, then right -> right, then negatives at random, then the positives left over. Where every sampled row
    ends right (or every one wrong) every candidate has one sign, and they come at random, Algorithm 1's rule 2.

    Either rule falls back on copies of the sampled rows when the candidates run out.
    """
    n = len(first)
    k = sum(b is True for b in second)
    found = pools(first, second, same_row=rule == "code")
    for pairs in found.values():
        rng.shuffle(pairs)
    chosen: list[tuple[int, int]] = []

    def take(pairs: list, most: int) -> None:
        room = max(0, min(most, extra - len(chosen)))
        chosen.extend(pairs[:room])
        del pairs[:room]

    if rule == "code":
        half = max(0, n - k) // 2
        take(found[FIX], half)
        take(found[KEEP], half)
        take(found[BREAK], 1)
        take(found[MISS], extra)
        take(found[BREAK], extra)
    else:  # a group whose sampled rows all end right (or all wrong) has pairs of one sign: they come at random
        take(found[FIX], group_size // 2 - k)
        take(found[KEEP], group_size // 2 - k - len(chosen))
        negatives = found[BREAK] + found[MISS]
        rng.shuffle(negatives)
        take(negatives, extra)
    leftover = found[FIX] + found[KEEP]
    rng.shuffle(leftover)
    take(leftover, extra)
    chosen.extend((i % n, i % n) for i in range(extra - len(chosen)))
    return chosen
