"""Final answers: read from completion text, compared, and counted across a group.

What a reward plugin uses to read a completion's final answer without a reference: an extractor turns text into
an answer (or ``None``), ``normalise``/``equivalent`` compare two answers, and ``group_answers`` clusters the
answers of one group (the completions of one prompt) into distinct answers with their counts, from which the
group statistics follow (majority answer and share, frequencies, entropy, rare answers). The built-in outcome
rewards read answers with the same code (``extract_answer``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Optional

from stackrl.errors import ConfigError

_ANSWER_PHRASE = re.compile(r"answer is[:\s]*\$?([^\n$]+?)\$?\s*\.?\s*$", re.IGNORECASE | re.MULTILINE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_SHORT_LHS = re.compile(r"^[A-Za-z]\w?=")  # "x=" before the value
_REMOVED = ("\\left", "\\right", "\\!", "^{\\circ}", "^\\circ", "\\%", "%", "\\$", "$", " ", "\n")
_WRAPPERS = ("\\boxed{", "\\fbox{")


class Extractor(Enum):
    """Where a completion states its final answer."""

    boxed = "boxed"  # the last \boxed{...} (or \fbox{...}), wrapper included
    answer_is = "answer_is"  # the X of the last "The answer is X"
    last_number = "last_number"  # the last number in the text (GSM8K-style completions)
    regex = "regex"  # the last match of a pattern: its first group, or the whole match
    auto = "auto"  # \boxed{...} if there is one, else "The answer is X" (what the built-in rewards read)


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
    for wrapper in _WRAPPERS:
        if answer.startswith(wrapper) and answer.endswith("}"):
            return answer[len(wrapper) : -1]
    return answer


def answer_after_phrase(text: str) -> str | None:
    """The X of the last "The answer is X" in ``text`` (without a closing period or ``$...$``), or ``None``."""
    phrases = _ANSWER_PHRASE.findall(text)
    return phrases[-1].strip().rstrip(".").strip() if phrases else None


def last_number(text: str) -> str | None:
    """The last number written in ``text`` (``-3``, ``1,000``, ``2.5``), or ``None``."""
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def extract_answer(text: str) -> str | None:
    """The final answer of a completion: the content of the last ``\\boxed{...}``, else the last "The answer is X"."""
    boxed = last_boxed(text)
    if boxed is not None:
        return unboxed(boxed).strip()
    return answer_after_phrase(text)


def make_extractor(kind: Extractor | str, pattern: str | None = None) -> Callable[[str], str | None]:
    """``text -> answer or None`` for an extractor; ``pattern`` (a regex) is needed by ``regex`` and only by it."""
    kind = Extractor(kind)
    if (kind is Extractor.regex) != (pattern is not None):
        raise ValueError("a pattern is needed by the regex extractor, and only by it")
    if kind is Extractor.boxed:
        return last_boxed
    if kind is Extractor.answer_is:
        return answer_after_phrase
    if kind is Extractor.last_number:
        return last_number
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


@dataclass
class AnswerSettings:
    """How a plugin reads and compares answers: the fields a plugin's ``Config`` inherits.

    A subclass that names its config ``section`` has them checked when it is built (:func:`extractor_of`), so a
    bad ``answer_regex`` is refused before training; its own ``__post_init__`` calls this one's.
    """

    section: ClassVar[Optional[str]] = None
    answer_extractor: Optional[Extractor] = None  # None: the run's answer format (data.answer_format)
    answer_regex: Optional[str] = None  # with answer_extractor: regex
    math_verify: bool = True  # answers also equal when math-verify finds them so

    def __post_init__(self):
        if self.section is not None:
            extractor_of(self, self.section)


def extractor_of(settings: AnswerSettings, section: str, run_format: str = "auto") -> Callable[[str], str | None]:
    """The extractor ``settings`` describe (their ``answer_extractor``, else the run's ``run_format``,
    ``rollout.answer_format``); a config error naming ``section``'s key when they do not fit."""
    try:
        return make_extractor(settings.answer_extractor or run_format, settings.answer_regex)
    except re.error as exc:
        raise ConfigError(f"{section}.answer_regex {settings.answer_regex!r} is not a valid regex: {exc}") from None
    except ValueError:
        raise ConfigError(f"{section}.answer_regex is needed with {section}.answer_extractor: regex, and only then") from None


def unread_answers_hint(texts: list[str], kind: Extractor | str, key: str) -> str:
    """Why the extractor ``kind`` (set by the config key ``key``) read no answer in ``texts``: what their answers
    look like, and which extractor reads them; for a plugin's ``ctx.acted`` hint."""
    kind = Extractor(kind)
    for other in (Extractor.answer_is, Extractor.boxed, Extractor.last_number):
        read = make_extractor(other)
        found = next(((text, read(text)) for text in texts if other is not kind and read(text)), None)
        if found is not None:
            text, answer = found
            line = next((line.strip() for line in reversed(text.splitlines()) if answer in line), answer)
            return f"{key} is '{kind.value}'; the answers look like '{line}' ('{other.value}' reads them)"
    return f"{key} is '{kind.value}'; no completion states an answer that any extractor reads"


def read_answers(ctx, settings: AnswerSettings, section: str, texts: list[str] | None = None) -> list[str | None]:
    """Each completion's final answer (``texts``, default ``ctx.rollout.completions``), read by ``settings``'
    extractor, else the run's answer format; reported as the plugin's activity, ``ctx.acted(answered,
    of=completions)``, with what the answers look like when it read none."""
    texts = ctx.rollout.completions if texts is None else texts
    kind = settings.answer_extractor or ctx.rollout.answer_format
    extract = extractor_of(settings, section, kind)
    answers = [extract(text) for text in texts]
    answered = sum(answer is not None for answer in answers)
    hint = None if answered else unread_answers_hint(texts, kind, f"{section}.answer_extractor")
    ctx.acted(answered, of=len(texts), hint=hint)
    return answers


def normalise(answer: str) -> str:
    """The comparable form of an answer's content: unboxed, without spacing, ``\\left``/``\\right``, units of
    degrees and percent, dollar signs, a trailing period, a short ``x =`` in front, thousands separators of a
    number; ``dfrac``/``tfrac`` read as ``frac``."""
    text = unboxed(answer)
    for piece in _REMOVED:
        text = text.replace(piece, "")
    text = text.replace("dfrac", "frac").replace("tfrac", "frac").rstrip(".")
    text = _SHORT_LHS.sub("", text)
    return text.replace(",", "") if re.fullmatch(r"-?[\d,]+(\.\d+)?", text) else text


def _math_verify_equal(a: str, b: str) -> bool:
    from math_verify import parse, verify

    def parsed(answer: str):
        return parse(answer if answer.startswith(_WRAPPERS) else f"${answer}$")

    left, right = parsed(a), parsed(b)
    return bool(left) and bool(right) and verify(left, right)


def equivalent(a: str, b: str, math_verify: bool = True) -> bool:
    """Two answers are the same: equal after ``normalise``, or (with ``math_verify``) equal for math-verify."""
    return normalise(a) == normalise(b) or (math_verify and _math_verify_equal(a, b))


@dataclass(frozen=True)
class GroupAnswers:
    """The answers of one group, clustered.

    ``answers[i]`` is row ``i``'s answer as extracted (``None``: none), ``index[i]`` its cluster among
    ``distinct`` (``None`` for no answer), ``distinct`` the clusters in order of first appearance, each kept as
    first written, and ``counts[k]`` the rows of cluster ``k``. Frequencies are shares of the whole group, so a
    group's frequencies sum to its answered share.
    """

    answers: list[str | None]
    index: list[int | None]
    distinct: list[str]
    counts: list[int]

    @property
    def size(self) -> int:
        return len(self.answers)

    @property
    def answered(self) -> int:
        return sum(self.counts)

    @property
    def frequencies(self) -> list[float]:
        """Each distinct answer's share of the group's rows."""
        return [count / self.size for count in self.counts]

    @property
    def majority(self) -> int | None:
        """The cluster with the most rows (a tie: the one written first), or ``None`` when nothing was answered."""
        if not self.counts:
            return None
        return max(range(len(self.counts)), key=lambda k: (self.counts[k], -k))

    @property
    def majority_answer(self) -> str | None:
        return None if self.majority is None else self.distinct[self.majority]

    @property
    def majority_share(self) -> float:
        """The majority answer's share of the group's rows (0 when nothing was answered)."""
        return 0.0 if self.majority is None else self.frequencies[self.majority]

    @property
    def entropy(self) -> float:
        """The entropy (nats) of the distribution of the answered rows over the distinct answers."""
        return -sum(c / self.answered * math.log(c / self.answered) for c in self.counts) if self.counts else 0.0

    def row_frequencies(self) -> list[float]:
        """Each row's answer's frequency in the group; 0 for a row without an answer."""
        frequencies = self.frequencies
        return [0.0 if k is None else frequencies[k] for k in self.index]

    def in_majority(self) -> list[bool]:
        """Whether each row's answer is the majority answer."""
        return [k is not None and k == self.majority for k in self.index]

    def rare(self, threshold: float) -> set[int]:
        """The clusters whose frequency is below ``threshold``."""
        return {k for k, frequency in enumerate(self.frequencies) if frequency < threshold}


def group_answers(answers: list[str | None], math_verify: bool = True) -> GroupAnswers:
    """Cluster one group's answers: an answer joins the first cluster it is ``equivalent`` to.

    Equality after normalisation is checked against every cluster first; math-verify, slower, only where it
    finds none.
    """
    distinct: list[str] = []
    keys: list[str] = []
    counts: list[int] = []
    index: list[int | None] = []
    for answer in answers:
        if answer is None:
            index.append(None)
            continue
        key = normalise(answer)
        found = next((k for k, known in enumerate(keys) if known == key), None)
        if found is None and math_verify:
            found = next((k for k, known in enumerate(distinct) if _math_verify_equal(known, answer)), None)
        if found is None:
            found = len(distinct)
            distinct.append(answer)
            keys.append(key)
            counts.append(0)
        counts[found] += 1
        index.append(found)
    return GroupAnswers(answers=list(answers), index=index, distinct=distinct, counts=counts)


def groups_of(answers: list[str | None], group_size: int, math_verify: bool = True) -> list[GroupAnswers]:
    """``group_answers`` of each group of a rollout's answers (row ``i`` in group ``i // group_size``)."""
    return [group_answers(answers[start : start + group_size], math_verify) for start in range(0, len(answers), group_size)]
