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
  ``wrong_solution`` on a correct one;
- ``correct_sibling``: the completion of another correct rollout of the row's group (the next one after the row,
  cyclically); ``wrong_sibling_1`` to ``wrong_sibling_4`` (``wrong_sibling`` is the first): the completions of up
  to four other wrong rollouts of the group that state an answer, in the same order. A row whose group has no
  such sibling has no value, and no context that uses it.

Correctness is ``stackrl.rewards.exact_match`` against the answer column (``rollout.answer_column``).

A context built from a template applies only to the rows that have privileged context
(:func:`stackrl.blocks.teacher.privileged_rows`): a row without an answer, or without a value the template uses (the
reference solution, for the derived fields), gets none, and its signals under the context are zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackrl.blocks.teacher import privileged_rows, teacher_prompts
from stackrl.errors import PluginError
from stackrl.plugin import template_fields
from stackrl.rewards import exact_match, extract_answer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE

if TYPE_CHECKING:
    from stackrl.context import Rollout

WRONG_SIBLINGS = 4
SIBLING_FIELDS = ("correct_sibling", "wrong_sibling", *(f"wrong_sibling_{k}" for k in range(1, WRONG_SIBLINGS + 1)))
DERIVED_FIELDS = (
    "response", "response_answer", "wrong_answer", "claimed_answer",
    "claimed_solution", "wrong_solution", "denied_solution", *SIBLING_FIELDS,
)


@dataclass(frozen=True)
class SignalContext:
    """What the sampled tokens are scored under: ``template`` formatted per row, or (``None``) the prompt the row
    was trained on. ``name`` is how errors and logs refer to it; the cache keys on the text, not the name, so
    two contexts that give a row the same prompt are scored once."""

    name: str
    template: str | None = None

    @property
    def derived(self) -> bool:
        """Whether the template uses a field derived from the reference (:data:`DERIVED_FIELDS`)."""
        return self.template is not None and bool(set(template_fields(self.template)) & set(DERIVED_FIELDS))

    def rows(self, rollout: Rollout) -> list[int]:
        """The rows this context applies to: every row for the trained prompt; for a template, the rows with
        privileged context and a value for every derived field it uses."""
        if self.template is None:
            return list(range(len(rollout)))
        rows = privileged_rows(rollout, self.template, columns=("solution",) if self.derived else ())
        used = set(template_fields(self.template)) & set(SIBLING_FIELDS)
        if used:
            fields = derived_fields(rollout, where=f"context '{self.name}'")
            rows = [i for i in rows if all(fields[name][i] is not None for name in used)]
        return rows

    def nth_wrong_sibling(self, k: int) -> SignalContext:
        """This context with ``{wrong_sibling}`` standing for the ``k``-th wrong sibling (1-based)."""
        if not 1 <= k <= WRONG_SIBLINGS:
            raise PluginError(f"context '{self.name}': wrong sibling {k} of at most {WRONG_SIBLINGS}")
        return SignalContext(f"{self.name}[{k}]", self.template.replace("{wrong_sibling}", f"{{wrong_sibling_{k}}}"))

    def prompts(self, rollout: Rollout) -> dict:
        """The context of each row it applies to, by row: the row's trained prompt tokens, or its formatted
        template."""
        if self.template is None:
            return dict(enumerate(rollout.prompt_ids))
        where = f"context '{self.name}'"
        columns = dict(rollout.columns)
        if self.derived:
            columns.update(derived_fields(rollout, where=where))
        rows = self.rows(rollout)
        chosen = {name: [values[i] for i in rows] for name, values in columns.items()}
        return dict(zip(rows, teacher_prompts([rollout.prompts[i] for i in rows], chosen, self.template, where=where)))


STUDENT = SignalContext("student")
REFERENCE = SignalContext("reference", REFERENCE_TEMPLATE)


def _replace_answer(solution: str, answer: str, replacement: str) -> str:
    """``solution`` with every whole-word occurrence of ``answer`` replaced (so ``14`` leaves ``114`` alone)."""
    return re.sub(rf"(?<![\w.]){re.escape(answer)}(?![\w])", lambda _: replacement, solution)


def derived_fields(rollout: Rollout, *, where: str) -> dict[str, list[str | None]]:
    """The fields of the module docstring, one value per row; ``None`` on a row without an answer or a solution."""
    missing = [c for c in ("solution", rollout.answer_column) if c not in rollout.columns]
    if missing:
        raise PluginError(
            f"{where}: its template uses fields derived from the reference, which need the columns solution and "
            f"{rollout.answer_column}; the rollout lacks {', '.join(missing)}"
        )
    answers = [None if a is None else str(a) for a in rollout.columns[rollout.answer_column]]
    fields = {name: [None] * len(rollout) for name in DERIVED_FIELDS}
    for i in privileged_rows(rollout, columns=("solution",)):
        text, answer, solution = rollout.completions[i], answers[i], str(rollout.columns["solution"][i])
        own, correct = extract_answer(text), bool(exact_match(text, answer))
        wrong = own if own is not None and not correct else _other_answer(answers, i, rollout.group_size, where=where)
        claimed = own if own is not None else wrong
        fields["response"][i] = text
        fields["response_answer"][i] = own or ""
        fields["wrong_answer"][i] = wrong
        fields["claimed_answer"][i] = claimed
        fields["claimed_solution"][i] = _replace_answer(solution, answer, claimed)
        fields["wrong_solution"][i] = _replace_answer(solution, answer, wrong)
        fields["denied_solution"][i] = fields["wrong_solution"][i] if correct else solution
    _siblings(rollout, answers, fields)
    return fields


def _siblings(rollout: Rollout, answers: list[str | None], fields: dict) -> None:
    """Fill the sibling fields of ``fields`` for the rows that have an answer: the other rollouts of each group,
    in cyclic order from the row's, split into correct ones and wrong ones that state an answer."""
    size = rollout.group_size
    for i in privileged_rows(rollout, columns=("solution",)):
        group = list(range(i // size * size, min((i // size + 1) * size, len(rollout))))  # a selection may cut it
        at = group.index(i)
        others = group[at + 1 :] + group[:at]
        texts = {j: rollout.completions[j] for j in others}
        correct = [j for j in others if answers[j] is not None and exact_match(texts[j], answers[j])]
        wrong = [j for j in others if j not in correct and extract_answer(texts[j]) is not None]
        fields["correct_sibling"][i] = texts[correct[0]] if correct else None
        for k, j in enumerate(wrong[:WRONG_SIBLINGS], start=1):
            fields[f"wrong_sibling_{k}"][i] = texts[j]
        fields["wrong_sibling"][i] = fields["wrong_sibling_1"][i]


def _other_answer(answers: list[str | None], row: int, group_size: int, *, where: str) -> str:
    """The answer of the nearest following group (cyclically) whose answer differs from row ``row``'s (a group
    without an answer has none to give), else the integer answer plus one."""
    n, own = len(answers), answers[row].strip()
    start = (row // group_size + 1) * group_size
    for offset in range(0, n, group_size):
        other = answers[(start + offset) % n]
        if other is not None and other.strip() != own:
            return other
    if re.fullmatch(r"-?\d+", own):  # one problem (or one answer) in the batch: a near miss
        return str(int(own) + 1)
    raise PluginError(
        f"{where}: a wrong answer for row {row} is taken from another problem of the batch, but no other problem "
        f"of the batch has an answer other than '{own}', and it is not an integer to change; use a batch of "
        "several problems"
    )
