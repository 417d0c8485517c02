"""The creator's evolving step: each chosen prompt (a parent) is shown to the policy in a pose request, alone, and
the first problem of each reply is a variant of it; the variants pass the self-instruction rules
(:func:`stackrl.blocks.selfinstruct.review`) and, where the run has a verifier of the task's problems, get their
answer from it.

The authors evolve each chosen prompt into four with EvolInstruct (a strong model rewriting it: deeper, more
constrained, more concrete); the policy that solves is the one that writes here, with the pose request the built-in
model learnt (:mod:`stackrl.tasks.posing`).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Optional

from stackrl.blocks.selfinstruct import REJECTIONS, SelfInstructSettings, SimilarityIndex, review
from stackrl.tasks.posing import REQUEST, parse_problems, request_text

UNVERIFIED = "unverified"  # a variant the verifier cannot read as the task's problem
REASONS = (*REJECTIONS, UNVERIFIED)


def evolve_request(parent: str, chat: bool, system_prompt: Optional[str] = None, request: str = REQUEST):
    """The request that asks for a variant of ``parent``: ``parent`` alone in a numbered list to continue (text
    ending with the next number), or a chat with an optional system message."""
    user = request_text([parent], request)
    if chat:
        return [*([{"role": "system", "content": system_prompt}] if system_prompt else []),
                {"role": "user", "content": user}]
    return f"{system_prompt}\n{user}" if system_prompt else user


def first_problem(text: str, chat: bool) -> Optional[str]:
    """The first problem of a reply to :func:`evolve_request`: a text reply continues the open number; a chat reply
    is its first numbered item, or the whole reply where it numbers none."""
    items = parse_problems(text, continued=not chat)
    if chat and not items:
        items = [" ".join(text.split())] if text.strip() else []
    return items[0] if items else None


def arithmetic_label(problem: str) -> Optional[dict]:
    """The built-in task's verifier: the answer and worked solution of a question of its form
    (:func:`stackrl.tasks.arithmetic.read_problem`), ``None`` for any other text."""
    from stackrl.tasks.arithmetic import read_problem

    read = read_problem(problem)
    return None if read is None else {"answer": read["answer"], "solution": read["solution"]}


LABELS: dict[str, Optional[Callable[[str], Optional[dict]]]] = {"none": None, "arithmetic": arithmetic_label}


def keep_variants(candidates: list[tuple[int, str]], known: list[str], rules: SelfInstructSettings,
                  label: Optional[Callable[[str], Optional[dict]]]) -> tuple[list[tuple[int, str, dict]], Counter]:
    """The variants to add, each ``(parent, problem, columns)``, from ``candidates`` (``(parent, problem)`` in
    request order), and the count of each rejection: the rules and the similarity to ``known`` and to the variants
    kept before it (:func:`stackrl.blocks.selfinstruct.review`), then the verifier ``label`` where given (its
    columns, e.g. the answer; ``None``: unverified)."""
    index = SimilarityIndex(known)
    kept, rejected = [], Counter()
    for parent, problem in candidates:
        passed, why = review([problem], index, rules)
        rejected.update(why)
        if not passed:
            continue
        columns = {} if label is None else label(problem)
        if columns is None:
            rejected[UNVERIFIED] += 1
            continue
        kept.append((parent, problem, columns))
    return kept, rejected
