"""Built-in outcome rewards: compare a completion's final answer with the dataset's reference answer.

A reward here is a plain function ``(completion_text, reference_answer) -> float``; the host turns the ones a
config names into reward components (see :mod:`stackrl.trainer`).
"""

from __future__ import annotations

from stackrl.answers import answer_after_phrase, extract_answer

__all__ = ["OUTCOME_REWARDS", "answer_after_phrase", "exact_match", "extract_answer", "math_verify"]


def _normalise(answer: str) -> str:
    return answer.replace(",", "").replace(" ", "").rstrip(".").lower()


def exact_match(completion: str, answer: str) -> float:
    """1.0 when the extracted final answer equals the reference after removing spaces and thousands separators."""
    found = extract_answer(completion)
    return float(found is not None and _normalise(found) == _normalise(str(answer)))


def math_verify(completion: str, answer: str) -> float:
    """1.0 when math-verify judges the completion's answer equivalent to the reference (fractions, LaTeX, ...)."""
    from math_verify import parse, verify

    found = extract_answer(completion)
    if found is None:
        return 0.0
    gold = parse(f"${answer}$")
    guess = parse(f"${found}$")
    return float(bool(gold) and bool(guess) and verify(gold, guess))


OUTCOME_REWARDS = {"exact_match": exact_match, "math_verify": math_verify}
