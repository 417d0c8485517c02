"""Named contexts the sampled tokens are scored under, and the per-row fields their templates may use.

A context is a template over the row's prompt (``{prompt}``), its dataset columns and the fields below, or the
student's own prompt. Besides the dataset's columns, a template may use fields derived from the row's response
and the reference (``solution`` and ``answer`` columns):

- ``response``: the row's completion; ``response_answer``: its final answer (``stackrl.rewards.extract_answer``),
  empty when it has none;
- ``wrong_answer``: an answer other than the true one: the row's own when it is wrong, else the answer of the
  nearest following group whose answer differs (another problem's answer, as a spoiled hint), else (a batch of
  one answer) the integer answer plus one;
- ``claimed_answer``: the answer the row claims (``wrong_answer`` when it states none);
- ``claimed_solution``, ``wrong_solution``: the reference solution with its answer replaced, wherever it appears
  as a whole number or word, by ``claimed_answer`` or ``wrong_answer``: a worked solution asserting that answer
  (``claimed_solution`` is the reference itself on a correct row);
- ``denied_solution``: a solution asserting an answer other than the row's: the reference on a wrong row,
  ``wrong_solution`` on a correct one.

Correctness is ``stackrl.rewards.exact_match`` against the ``answer`` column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrl.errors import PluginError
from stackrl.rewards import exact_match, extract_answer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.teacher import template_fields, teacher_prompts

if TYPE_CHECKING:
    from stackrl.context import Rollout

DERIVED_FIELDS = (
    "response", "response_answer", "wrong_answer", "claimed_answer",
    "claimed_solution", "wrong_solution", "denied_solution",
)


@dataclass(frozen=True)
class SignalContext:
    """What the sampled tokens are scored under: ``template`` formatted per row, or (``None``) the prompt the row
    was trained on. ``name`` is how errors and logs refer to it; the cache keys on the text, not the name, so
    two contexts that give a row the same prompt are scored once."""

    name: str
    template: str | None = None

    def prompts(self, rollout: Rollout) -> list:
        """One context per row: the row's trained prompt tokens, or its formatted template."""
        if self.template is None:
            return rollout.prompt_ids
        used = set(template_fields(self.template))
        columns = dict(rollout.columns)
        if used & set(DERIVED_FIELDS):
            columns.update(derived_fields(rollout, where=f"context '{self.name}'"))
        return teacher_prompts(rollout.prompts, columns, self.template, where=f"context '{self.name}'")


STUDENT = SignalContext("student")
REFERENCE = SignalContext("reference", REFERENCE_TEMPLATE)


def _replace_answer(solution: str, answer: str, replacement: str) -> str:
    """``solution`` with every whole-word occurrence of ``answer`` replaced (so ``14`` leaves ``114`` alone)."""
    return re.sub(rf"(?<![\w.]){re.escape(answer)}(?![\w])", lambda _: replacement, solution)


def derived_fields(rollout: Rollout, *, where: str) -> dict[str, list[str]]:
    """The fields of the module docstring, one value per row."""
    missing = [c for c in ("solution", "answer") if c not in rollout.columns]
    if missing:
        raise PluginError(
            f"{where}: its template uses fields derived from the reference, which need the columns solution and "
            f"answer; the rollout lacks {', '.join(missing)}"
        )
    answers = [str(a) for a in rollout.columns["answer"]]
    solutions = [str(s) for s in rollout.columns["solution"]]
    own = [extract_answer(text) for text in rollout.completions]
    correct = [bool(exact_match(text, answer)) for text, answer in zip(rollout.completions, answers)]
    size = rollout.group_size
    fields = {name: [] for name in DERIVED_FIELDS}
    for i, text in enumerate(rollout.completions):
        if own[i] is not None and not correct[i]:
            wrong = own[i]
        else:
            wrong = _other_answer(answers, i, size, where=where)
        claimed = own[i] if own[i] is not None else wrong
        fields["response"].append(text)
        fields["response_answer"].append(own[i] or "")
        fields["wrong_answer"].append(wrong)
        fields["claimed_answer"].append(claimed)
        fields["claimed_solution"].append(_replace_answer(solutions[i], answers[i], claimed))
        fields["wrong_solution"].append(_replace_answer(solutions[i], answers[i], wrong))
        fields["denied_solution"].append(fields["wrong_solution"][-1] if correct[i] else solutions[i])
    return fields


def _other_answer(answers: list[str], row: int, group_size: int, *, where: str) -> str:
    """The answer of the nearest following group (cyclically) whose answer differs from row ``row``'s, else the
    integer answer plus one."""
    n = len(answers)
    start = (row // group_size + 1) * group_size
    for offset in range(0, n, group_size):
        other = answers[(start + offset) % n]
        if other.strip() != answers[row].strip():
            return other
    if re.fullmatch(r"-?\d+", answers[row].strip()):  # one problem (or one answer) in the batch: a near miss
        return str(int(answers[row]) + 1)
    raise PluginError(
        f"{where}: a wrong answer for row {row} is taken from another problem of the batch, but every problem of "
        "the batch has the same answer, and it is not an integer to change; use a batch of several problems"
    )
