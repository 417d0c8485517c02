"""MR-RLVR's two self-supervised process tasks, built from a worked solution, and how a completion agrees with it.

A solution's steps are its lines; the last line (the answer) is the conclusion, never moved. On the built-in task::

    solution:   "3 + 4 = 7\\n7 * 2 = 14\\nThe answer is 14."
    fill:       "3 + 4 = [MASK]\\n[MASK] * 2 = 14\\nThe answer is 14."   (step 0's result, wherever it recurs)
    reorder:    "7 * 2 = 14\\n3 + 4 = 7\\nThe answer is 14."             (the steps before the last, shuffled)

The policy is shown the altered solution and writes the solution out; its reward is its agreement with the
original: for a fill, whether the masked step comes back whole (1 or 0); for a reorder, the share of the steps it
writes in their original order.
"""

from __future__ import annotations

import random
import re

FILL, REORDER = "fill", "reorder"
TASKS = (FILL, REORDER)


def steps_of(solution: str) -> list[str]:
    """The solution's lines, stripped, without empty ones."""
    return [line.strip() for line in solution.split("\n") if line.strip()]


def maskable_steps(solution: str) -> list[int]:
    """The steps whose result a fill task can mask: lines before the last with an ``=`` and a result after it."""
    lines = steps_of(solution)
    return [i for i, line in enumerate(lines[:-1]) if "=" in line and line.rsplit("=", 1)[1].strip()]


def masked_solution(solution: str, step: int, mask: str) -> str:
    """``solution`` with step ``step``'s result (what follows its last ``=``) replaced by ``mask``, there and as
    a whole number or word in every later line, so that it cannot be copied from where it is used next."""
    lines = steps_of(solution)
    if step not in maskable_steps(solution):
        raise ValueError(f"step {step} of this solution has no result to mask: {solution!r}")
    left, result = lines[step].rsplit("=", 1)
    result = result.strip()
    lines[step] = f"{left.rstrip()} = {mask}"
    whole = re.compile(rf"(?<![\w.]){re.escape(result)}(?![\w])")
    lines[step + 1 :] = [whole.sub(mask, line) for line in lines[step + 1 :]]
    return "\n".join(lines)


def shuffled_solution(solution: str, rng: random.Random) -> str:
    """``solution`` with its steps before the last in another order (never the original one)."""
    lines = steps_of(solution)
    steps, last = lines[:-1], lines[-1:]
    if len(set(steps)) < 2:
        raise ValueError(f"a reorder task needs two different steps before the last line: {solution!r}")
    order = list(range(len(steps)))
    while [steps[i] for i in order] == steps:
        rng.shuffle(order)
    return "\n".join([steps[i] for i in order] + last)


def fill_agreement(completion: str, solution: str, step: int) -> float:
    """1.0 when the completion writes step ``step`` of ``solution`` as a line of its own, exactly (spaces at the
    ends aside): the masked result is restored with the operands it belongs to; else 0.0."""
    return float(steps_of(solution)[step] in steps_of(completion))


def order_agreement(completion: str, solution: str) -> float:
    """The share of the steps before the last that the completion writes in their original order: the longest
    common subsequence of its lines and those steps, over their number (1.0: all of them, in order)."""
    original = steps_of(solution)[:-1]
    written = steps_of(completion)
    # lcs[j]: the longest common subsequence of the lines read so far and original[:j]
    lcs = [0] * (len(original) + 1)
    for line in written:
        previous = lcs[:]
        for j, step in enumerate(original, start=1):
            lcs[j] = previous[j - 1] + 1 if line == step else max(previous[j], lcs[j - 1])
    return lcs[-1] / len(original)
