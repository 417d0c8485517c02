"""A generated multi-step arithmetic task with exact integer answers.

A problem is a left-to-right chain of ``+``, ``-`` and ``*`` on non-negative integers, written with explicit
parentheses so the question is also a valid Python expression::

    question: "What is (3 + 4) * 2?\\n"
    solution: "3 + 4 = 7\\n7 * 2 = 14\\nThe answer is 14."
    answer:   "14"

The model is given ``question`` verbatim and must continue it with ``solution`` (then eos): one step per line,
then the fixed final line ``The answer is N.``, which :func:`stackrl.rewards.exact_match` reads.

Difficulty (``category``) is the number of steps and the size of the added/subtracted operands; multipliers are
always a single digit (2-9) and a subtraction is only chosen when the running value stays non-negative, so
every intermediate result is a non-negative integer.

Train/test split: a problem belongs to exactly one split, decided by a hash of its question text (about 1 in 5
questions belong to "test"). Each ``(split, seed)`` draws candidates from its own RNG stream and keeps only the
questions of its split, so any train set is disjoint from any test set, whatever the sizes and seeds. Within one
dataset questions are distinct (unless ``distinct=False``).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

__all__ = ["CATEGORIES", "REFERENCE_TEMPLATE", "SPLITS", "make_dataset", "make_problem", "read_problem", "reference_prompt",
           "split_of"]

# A prompt that shows a worked solution before the question: what a privileged-context teacher reads. The
# built-in model is trained on it too (stackrl.tasks.pretrain), so it continues such a prompt by following the
# reference; plugins format it with the dataset prompt as {prompt}.
REFERENCE_TEMPLATE = "{solution}\n\n{prompt}"


def reference_prompt(solution: str, question: str) -> str:
    """``question`` preceded by the worked ``solution``, as :data:`REFERENCE_TEMPLATE` lays it out."""
    return REFERENCE_TEMPLATE.format(solution=solution, prompt=question)


@dataclass(frozen=True)
class _Spec:
    steps: int
    digits: int  # size of the first number and of added/subtracted operands


_SPECS = {
    "2 steps, 1-digit": _Spec(2, 1),
    "3 steps, 1-digit": _Spec(3, 1),
    "2 steps, 2-digit": _Spec(2, 2),
    "4 steps, 1-digit": _Spec(4, 1),
    "3 steps, 2-digit": _Spec(3, 2),
    "4 steps, 2-digit": _Spec(4, 2),
}
CATEGORIES: list[str] = list(_SPECS)  # easiest first
SPLITS = ("train", "test")
_TEST_BUCKETS = 20  # of 100 hash buckets -> test


def split_of(question: str) -> str:
    """The split a question belongs to ("train" or "test"), from a stable hash of its text."""
    bucket = int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "big") % 100
    return "test" if bucket < _TEST_BUCKETS else "train"


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randint(1, 9) if digits == 1 else rng.randint(10 ** (digits - 1), 10**digits - 1)


def make_problem(rng: random.Random, category: str) -> dict[str, str]:
    """One problem of ``category`` drawn with ``rng``: a dict with question, answer, solution, category."""
    spec = _SPECS[category]
    value = _operand(rng, spec.digits)
    expr = str(value)
    lines = []
    for step in range(spec.steps):
        op = rng.choice("+-*")
        operand = rng.randint(2, 9) if op == "*" else _operand(rng, spec.digits)
        if op == "-" and operand > value:
            op = "+"
        result = value + operand if op == "+" else value - operand if op == "-" else value * operand
        lines.append(f"{value} {op} {operand} = {result}")
        expr = f"({expr}) {op} {operand}" if step else f"{expr} {op} {operand}"
        value = result
    lines.append(f"The answer is {value}.")
    return {
        "question": f"What is {expr}?\n",
        "answer": str(value),
        "solution": "\n".join(lines),
        "category": category,
    }


def make_dataset(
    split: str = "train",
    size: int = 256,
    seed: int = 0,
    categories: list[str] | None = None,
    distinct: bool = True,
):
    """``size`` problems of ``split``, cycling through ``categories`` (default: all, easiest first).

    Questions are distinct unless ``distinct=False`` (for large training sets: the easiest category has only a
    few thousand problems). Same arguments -> same rows. Returns a :class:`datasets.Dataset` with columns question, answer, solution,
    category.
    """
    from datasets import Dataset

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    categories = list(categories) if categories else list(CATEGORIES)
    unknown = [c for c in categories if c not in _SPECS]
    if unknown:
        raise ValueError(f"unknown categories {unknown}; known: {CATEGORIES}")
    rng = random.Random(f"stackrl.arithmetic/{split}/{seed}")
    rows, seen = [], set()
    attempts = 0
    while len(rows) < size:
        category = categories[len(rows) % len(categories)]
        problem = make_problem(rng, category)
        attempts += 1
        if attempts > 200 * size + 10_000:
            raise ValueError(f"could not draw {size} distinct {split} problems from {categories}")
        if (distinct and problem["question"] in seen) or split_of(problem["question"]) != split:
            continue
        seen.add(problem["question"])
        rows.append(problem)
    if not rows:
        return Dataset.from_dict({"question": [], "answer": [], "solution": [], "category": []})
    return Dataset.from_list(rows)


_QUESTION = re.compile(r"What is ([\d()+*\- ]+)\?")
_CHAIN = re.compile(r"\d+|[-+*]")


def read_problem(question: str) -> dict[str, str | None] | None:
    """The problem a question of this task's form asks (``make_problem``'s dict, its category ``None`` when the
    numbers fit none), or ``None`` for text that is not such a question: the chain written as ``make_problem``
    writes it, multipliers 2-9, no value below 0. How a problem the policy wrote itself is read."""
    found = _QUESTION.fullmatch(question.strip())
    if found is None:
        return None
    value, *rest = _CHAIN.findall(found[1])
    value, expr, lines, operands = int(value), value, [], [int(value)]
    if len(rest) % 2 or not rest or value < 1:
        return None
    for step, (op, text) in enumerate(zip(rest[::2], rest[1::2])):
        operand = int(text)
        if op not in "+-*" or not text.isdigit() or (op == "*" and not 2 <= operand <= 9) or operand < 1:
            return None
        result = value + operand if op == "+" else value - operand if op == "-" else value * operand
        if result < 0:
            return None
        lines.append(f"{value} {op} {operand} = {result}")
        expr = f"({expr}) {op} {operand}" if step else f"{expr} {op} {operand}"
        if op != "*":  # a multiplier is one digit in every category
            operands.append(operand)
        value = result
    if f"What is {expr}?" != question.strip():
        return None
    digits = {len(str(n)) for n in operands}
    category = next((name for name, spec in _SPECS.items() if spec.steps == len(lines) and digits == {spec.digits}), None)
    lines.append(f"The answer is {value}.")
    return {"question": f"What is {expr}?\n", "answer": str(value), "solution": "\n".join(lines), "category": category}
