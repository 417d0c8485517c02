"""SSRL's rule-based reward, as the authors' reward manager computes it: the self-search format score (tags in
order, a `<search>` always followed by its `<information>`, one think per search plus one) and the exact match of
the last `<answer>` with a reference, combined 0.9 : 0.1."""

from __future__ import annotations

import re
import string

TAGS = ("think", "search", "information", "answer")
_ALLOWED = {*TAGS, *(f"/{t}" for t in TAGS)}
_ANY_TAG = re.compile(r"<([^>]+)>")
_OUR_TAGS = re.compile(r"<(/?(?:think|search|information|answer))>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# Placeholders a prompt's format instructions use: a block that copies one is not content.
PLACEHOLDERS = {"search": "your query", "think": "your thoughts", "answer": "your answer",
                "information": "your information"}


def contents(text: str, tag: str) -> list[str]:
    """The text inside each ``<tag>...</tag>`` of ``text`` (across lines)."""
    return re.findall(f"<{tag}>(.*?)</{tag}>", text, re.DOTALL)


def format_score(text: str, max_turn: int = 2, upper_bound: int = 8) -> float:
    """The self-search format reward of a completion, in [0, 1].

    0 unless: no tag but the four (and their closings); the text starts with ``<think>`` and ends with
    ``</answer>``; at least four tags, the first two ``<think></think>``, the last two ``<answer></answer>``; every
    ``<search>`` in between is followed at once by ``</search><information></information>``; as many searches as
    information blocks; no block empty or a copy of its placeholder; a search query on one line. Then
    ``min(thinks / max_turn, 1)``, times ``min(thinks, searches + 1) / max(thinks, searches + 1)`` where a think
    does not come with each search, and 0 beyond ``upper_bound`` thinks.
    """
    text = text.strip()
    if any(tag not in _ALLOWED for tag in _ANY_TAG.findall(text)):
        return 0.0
    if not (text.startswith("<think>") and text.endswith("</answer>")):
        return 0.0
    tags = _OUR_TAGS.findall(text)
    if len(tags) < 4:
        return 0.0
    for tag in TAGS:
        for content in contents(text, tag):
            if not content.strip() or PLACEHOLDERS[tag] in content.lower():
                return 0.0
            if tag == "search" and len(content.split("\n")) != 1:
                return 0.0
    if tags[:2] != ["think", "/think"] or tags[-2:] != ["answer", "/answer"]:
        return 0.0
    middle = tags[2:-2]
    i = 0
    while i < len(middle):
        if middle[i] == "search":
            if middle[i + 1:i + 4] != ["/search", "information", "/information"]:
                return 0.0
            i += 4
        else:
            i += 1
    thinks, searches = text.count("<think>"), text.count("<search>")
    if searches != text.count("<information>"):
        return 0.0
    if thinks > upper_bound:
        return 0.0
    ratio = min(thinks, searches + 1) / max(thinks, searches + 1)
    return min(thinks / max_turn, 1.0) * ratio


def final_answer(text: str) -> str | None:
    """The content of the last ``<answer>...</answer>`` (stripped), or ``None``."""
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


def normalize(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match(answer: str | None, references) -> float:
    """1.0 where the normalised ``answer`` equals one reference's (a string or a list of them), else 0.0."""
    if answer is None:
        return 0.0
    references = [references] if isinstance(references, str) else list(references)
    return float(any(normalize(answer) == normalize(str(r)) for r in references))


def combined(outcome: float, form: float, outcome_weight: float = 0.9, format_weight: float = 0.1) -> float:
    """The reward GRPO sees: ``outcome_weight * outcome + format_weight * format``."""
    return outcome_weight * outcome + format_weight * form
