"""Critical spans on segments: a response's token groups that end at a newline token.

Annotator answers, dataset columns and rules all name whole segments, so every source maps exactly onto tokens.
A span is a run of segments; a row's spans become sorted token positions under a coverage cap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEY, ERROR = "key", "error"
# The label the teacher sees when the source gives none (a rule, a list of segment numbers, an unlabeled answer).
DEFAULT_LABELS = {KEY: "a key reasoning step", ERROR: "a reasoning error"}
MAX_LABEL_CHARS = 60

# Segment numbers of at most nine digits: longer runs of digits are no segment number (and int() of thousands of
# digits would raise). A range is "a-b", "a–b" or "a to b".
_ITEM = re.compile(r"(?<!\d)(\d{1,9})(?!\d)(?:\s*(?:-|–|—|to)\s*(?<!\d)(\d{1,9})(?!\d))?")
_SPANS_LINE = re.compile(r"^\W*spans?\s*[:=](.*)$", re.IGNORECASE | re.MULTILINE)
_TYPE_LINE = re.compile(r"^\W*type\s*[:=](.*)$", re.IGNORECASE | re.MULTILINE)


@dataclass
class RowSpans:
    """One row's spans: their kind (key or error), token positions (sorted) and the teacher's label."""

    kind: str
    positions: list[int]
    label: str


def numbered(texts: list[str]) -> str:
    """The segments as the annotator reads them: ``[k] text``, one a line, numbered from 1."""
    return "\n".join(f"[{k}] {text.rstrip()}" for k, text in enumerate(texts, start=1))


def parse_annotation(answer: str, num_segments: int) -> tuple[list[tuple[int, int]], str | None]:
    """The spans (0-based, inclusive segment ranges, in the order given) and the label in an annotator's answer.

    Reads the last ``SPANS:`` and ``TYPE:`` lines (a reasoning model may draft them before its final answer).
    Anything else — no such line, numbers outside ``1..num_segments``, reversed ranges — gives no span for that
    item; a malformed answer gives no spans at all, never an error.
    """
    lines = _SPANS_LINE.findall(answer or "")
    spans = ranges_of(lines[-1], num_segments) if lines else []
    types = _TYPE_LINE.findall(answer or "")
    return spans, clean_label(types[-1]) if types else None


def reached_spans_line(answer: str | None) -> bool:
    """Whether an annotator's answer has a ``SPANS:`` line at all (a thinking model out of budget never gets there)."""
    return bool(_SPANS_LINE.search(answer or ""))


def ranges_of(text: str, num_segments: int) -> list[tuple[int, int]]:
    """0-based inclusive segment ranges from text such as ``"3, 5-6"``; items outside the response are dropped."""
    spans = []
    for match in _ITEM.finditer(text):
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if 1 <= first <= last and first <= num_segments:
            spans.append((first - 1, min(last, num_segments) - 1))
    return spans


def clean_label(text: str) -> str | None:
    """A short one-line label, or ``None`` if nothing readable is left."""
    label = " ".join(text.split())[:MAX_LABEL_CHARS].strip(" .,;:<>\"'")
    return label or None


def capped_positions(spans: list[tuple[int, int]], bounds: list[tuple[int, int]], budget: int) -> list[int]:
    """Token positions of ``spans`` (segment ranges, in priority order) until ``budget`` tokens are taken.

    Each span adds the tokens no earlier span took; the span that reaches the budget keeps its first tokens,
    where a step's decision is made, and later spans are dropped.
    """
    chosen: set[int] = set()
    for first, last in spans:
        fresh = [t for t in range(bounds[first][0], bounds[last][1]) if t not in chosen]
        chosen.update(fresh[: budget - len(chosen)])
        if len(chosen) >= budget:
            break
    return sorted(chosen)
