"""A completion's reasoning steps, as character spans of its text, split by the authors' rules.

A step is a non-empty line. Lines from one that opens a display formula (``\\[`` without ``\\]``) to the line that
closes it form one step. With ``max_steps`` steps or more, a step ending in ``:`` absorbs the next one; if that
still leaves ``max_steps`` or more, consecutive steps are merged into exactly ``max_steps`` chunks, the shorter
chunks first. A span runs from a step's first to its last non-blank character.
"""

from __future__ import annotations

Span = tuple[int, int]


def _lines(text: str) -> list[Span]:
    spans, start = [], 0
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped:
            left = start + line.index(stripped[0])
            spans.append((left, left + len(stripped)))
        start += len(line) + 1
    return spans


def _join_display_math(text: str, lines: list[Span]) -> list[Span]:
    steps, block = [], []
    for span in lines:
        line = text[span[0] : span[1]]
        opens, closes = "\\[" in line, "\\]" in line
        if block or (opens and not closes):
            block.append(span)
            if closes and not opens:
                steps.append((block[0][0], block[-1][1]))
                block = []
        else:
            steps.append(span)
    return steps + block  # a block never closed stays line by line


def _absorb_after_colon(text: str, steps: list[Span]) -> list[Span]:
    merged, i = [], 0
    while i < len(steps):
        if text[steps[i][1] - 1] == ":" and i + 1 < len(steps):
            merged.append((steps[i][0], steps[i + 1][1]))
            i += 2
        else:
            merged.append(steps[i])
            i += 1
    return merged


def _chunks(steps: list[Span], count: int) -> list[Span]:
    short, extra = divmod(len(steps), count)
    sizes = [short] * (count - extra) + [short + 1] * extra
    chunks, start = [], 0
    for size in sizes:
        chunks.append((steps[start][0], steps[start + size - 1][1]))
        start += size
    return chunks


def split_steps(text: str, max_steps: int = 15) -> list[Span]:
    """The ``(start, end)`` character spans of ``text``'s steps, at most ``max_steps`` of them."""
    steps = _join_display_math(text, _lines(text))
    if len(steps) >= max_steps:
        steps = _absorb_after_colon(text, steps)
    if len(steps) >= max_steps:
        steps = _chunks(steps, max_steps)
    return steps
