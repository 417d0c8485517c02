"""Final answers: read from each completion, then clustered into a group's distinct answers.

An answer is kept as written (``\\boxed{42}`` stays boxed, as the authors' probes carry it) and compared by its
content: equal after normalisation (spacing, ``\\left``/``\\right``, ``dfrac``, units of degrees and percent, a
trailing period, thousands separators), or, optionally, equal for math-verify.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from stackrl.rewards import answer_after_phrase
from stackrl_covo.config import Extractor

_SHORT_LHS = re.compile(r"^[A-Za-z]\w?=")  # "x=" before the value
_REMOVED = ("\\left", "\\right", "\\!", "^{\\circ}", "^\\circ", "\\%", "%", "\\$", "$", " ", "\n")


def last_boxed(text: str) -> str | None:
    """The last ``\\boxed{...}`` (else ``\\fbox{...}``) with its wrapper, braces balanced; ``None`` if none closes."""
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def unboxed(answer: str) -> str:
    """The content of a ``\\boxed{...}``/``\\fbox{...}`` answer; other answers unchanged."""
    for wrapper in ("\\boxed{", "\\fbox{"):
        if answer.startswith(wrapper) and answer.endswith("}"):
            return answer[len(wrapper) : -1]
    return answer


def make_extractor(kind: Extractor, pattern: str | None = None) -> Callable[[str], str | None]:
    """``text -> answer or None`` for the configured extractor."""
    if kind is Extractor.boxed:
        return last_boxed
    if kind is Extractor.answer_is:
        return answer_after_phrase
    if kind is Extractor.auto:
        return lambda text: last_boxed(text) or answer_after_phrase(text)
    compiled = re.compile(pattern, re.MULTILINE)

    def by_regex(text: str) -> str | None:
        matches = list(compiled.finditer(text))
        if not matches:
            return None
        last = matches[-1]
        return (last.group(1) if compiled.groups else last.group(0)).strip() or None

    return by_regex


def normalise(answer: str) -> str:
    """The comparable form of an answer's content."""
    text = unboxed(answer)
    for piece in _REMOVED:
        text = text.replace(piece, "")
    text = text.replace("dfrac", "frac").replace("tfrac", "frac").rstrip(".")
    text = _SHORT_LHS.sub("", text)
    return text.replace(",", "") if re.fullmatch(r"-?[\d,]+(\.\d+)?", text) else text


def _math_verify_equal(a: str, b: str) -> bool:
    from math_verify import parse, verify

    def parsed(answer: str):
        return parse(answer if answer.startswith(("\\boxed", "\\fbox")) else f"${answer}$")

    left, right = parsed(a), parsed(b)
    return bool(left) and bool(right) and verify(left, right)


def cluster(answers: list[str | None], use_math_verify: bool) -> tuple[list[int | None], list[str]]:
    """Each answer's index among the distinct answers (``None`` for no answer), and the distinct answers.

    Distinct answers are numbered in order of first appearance and kept as first written.
    """
    distinct: list[str] = []
    keys: list[str] = []
    index: list[int | None] = []
    for answer in answers:
        if answer is None:
            index.append(None)
            continue
        key = normalise(answer)
        found = next((j for j, k in enumerate(keys) if k == key), None)
        if found is None and use_math_verify:
            found = next((j for j, d in enumerate(distinct) if _math_verify_equal(d, answer)), None)
        if found is None:
            found = len(distinct)
            distinct.append(answer)
            keys.append(key)
        index.append(found)
    return index, distinct
