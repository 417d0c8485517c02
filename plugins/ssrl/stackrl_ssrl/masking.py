"""The information mask: the tokens of each ``<information>...</information>`` block the policy wrote itself (tags
included) stay out of the policy loss, as the authors' ``enable_information_loss_mask`` does."""

from __future__ import annotations

import re
from typing import Sequence

_BLOCK = re.compile(r"<information>.*?</information>", re.DOTALL)
_ONE_LINE_BLOCK = re.compile(r"<information>.*?</information>")


def information_spans(text: str, across_lines: bool = True) -> list[tuple[int, int]]:
    """The character spans ``[start, end)`` of the ``<information>...</information>`` blocks of ``text``, tags
    included; with ``across_lines`` false only blocks on one line (the authors' pattern)."""
    pattern = _BLOCK if across_lines else _ONE_LINE_BLOCK
    return [m.span() for m in pattern.finditer(text)]


def first_token_reaching(tokenizer, ids: Sequence[int], length: int, *, beyond: bool) -> int:
    """The first index ``k`` whose prefix ``ids[:k + 1]`` decodes to more than ``length`` characters (``beyond``) or
    to at least ``length`` (not ``beyond``); ``len(ids)`` if none. A binary search: a few decodes per boundary."""
    low, high = 0, len(ids)
    while low < high:
        middle = (low + high) // 2
        reached = len(tokenizer.decode(list(ids[:middle + 1]), skip_special_tokens=True))
        if reached > length or (not beyond and reached == length):
            high = middle
        else:
            low = middle + 1
    return low


def information_mask(tokenizer, ids: Sequence[int], across_lines: bool = True) -> list[int]:
    """One 0/1 per token of ``ids``: 0 on each token that overlaps an information block of the decoded text (the
    first token whose text passes the block's start, to the first whose text reaches its end)."""
    text = tokenizer.decode(list(ids), skip_special_tokens=True)
    mask = [1] * len(ids)
    for start, end in information_spans(text, across_lines):
        first = first_token_reaching(tokenizer, ids, start, beyond=True)
        last = first_token_reaching(tokenizer, ids, end, beyond=False)
        mask[first:last + 1] = [0] * (min(last + 1, len(ids)) - first)
    return mask
