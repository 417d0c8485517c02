"""The built-in task ``lookup`` (``data.source: lookup``): the arithmetic task with its first number given by a
name whose value only a corpus states, so that a question is answered by searching the corpus, reading the value and
working the chain out::

    question: "What is (kavo + 4) * 3?\\n"        corpus: "kavo is 37."
    solution: "37 + 4 = 41\\n41 * 3 = 123\\nThe answer is 123."     answer: "123"    name: "kavo"

:func:`corpus` is the built-in corpus the ``search`` environment searches by default (:mod:`stackrl.blocks.env.search`):
one document per name, ``"<name> is <value>."``, the same on every machine. Every value of the arithmetic task's first
numbers (1 to 99) has names. A problem's category and split are the arithmetic task's rules applied to the named
question (:func:`stackrl.tasks.arithmetic.split_of`), so train and test questions never meet.
"""

from __future__ import annotations

import random
import re
from functools import cache

from stackrl.tasks.arithmetic import CATEGORIES, SPLITS, make_problem, split_of

__all__ = ["NAMES", "corpus", "make_dataset", "value_of"]

_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"
_NAMES_PER_VALUE = 4
_FIRST = re.compile(r"What is (\(*)(\d+)")  # the question's opening brackets and first number


@cache
def _names() -> tuple[tuple[str, int], ...]:
    """Distinct two- and three-syllable names with their values, each value 1-99 given to several names."""
    rng, seen, named = random.Random("stackrl.lookup"), set(), []
    for value in [v for v in range(1, 100) for _ in range(_NAMES_PER_VALUE)]:
        while True:
            name = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 3))))
            if name not in seen:
                break
        seen.add(name)
        named.append((name, value))
    rng.shuffle(named)
    return tuple(named)


NAMES: tuple[str, ...] = tuple(name for name, _ in _names())


def value_of(name: str) -> int:
    return dict(_names())[name]


def corpus() -> list[str]:
    """The built-in corpus: one document per name stating its value."""
    return [f"{name} is {value}." for name, value in _names()]


def make_dataset(split: str = "train", size: int = 256, seed: int = 0, categories: list[str] | None = None):
    """``size`` distinct problems of ``split``, cycling through ``categories`` (default: all of the arithmetic task's),
    each with its first number named. Columns question, answer, solution, category, name."""
    from datasets import Dataset

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    categories = list(categories) if categories else list(CATEGORIES)
    by_value: dict[int, list[str]] = {}
    for name, value in _names():
        by_value.setdefault(value, []).append(name)
    rng = random.Random(f"stackrl.lookup/{split}/{seed}")
    rows, seen = [], set()
    for _ in range(200 * size + 10_000):
        if len(rows) == size:
            break
        problem = make_problem(rng, categories[len(rows) % len(categories)])
        first = _FIRST.match(problem["question"])
        name = rng.choice(by_value[int(first[2])])
        question = f"What is {first[1]}{name}{problem['question'][first.end():]}"
        if question in seen or split_of(question) != split:
            continue
        seen.add(question)
        rows.append({**problem, "question": question, "name": name})
    else:
        raise ValueError(f"could not draw {size} distinct {split} problems from {categories}")
    return Dataset.from_list(rows)
