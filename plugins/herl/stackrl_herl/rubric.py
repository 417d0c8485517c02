"""HeRL's rubric on the built-in task: an attempt's per-line checks, and the hindsight guidance built from them.

The authors grade a response against a list of rubric items with programmatic checkers and show the policy which
items the response met and which it did not. Here the rubric of an attempt is its lines: each step is checked
afresh from the operands it wrote, and the final line against the last step's result, as the perfect judge of the
built-in task does (``stackrl.tasks.roles.judge_reply``): a met item is marked ``yes``, the first unmet one ``no``
beside the value it should have had, and the check stops there (the items after it are left unchecked). The
guidance is the failed attempt and that check, followed by the retry instruction: ``checked_retry_prompt``.

``rubric: answer`` is a rubric of one item for tasks without per-line checks (a math set on a GPU): whether the
final answer is right, shown as a sentence that names the attempt's answer and says it is not the one asked for.
"""

from __future__ import annotations

from stackrl.rewards import extract_answer
from stackrl.tasks.roles import SAME, checked_retry_prompt, judge_reply

LINES, ANSWER = "lines", "answer"
RUBRICS = (LINES, ANSWER)


def line_check(attempt: str) -> str | None:
    """The per-line check of ``attempt`` (the judge reply of a perfect judge), or ``None`` where the attempt is not
    in the task's format (no line can be checked: a cut-off or malformed attempt)."""
    try:
        return judge_reply(attempt.strip())
    except ValueError:
        return None


def answer_check(attempt: str) -> str:
    """The one-item rubric of a wrong attempt: its final answer, and that it is not the one asked for."""
    own = extract_answer(attempt)
    return "There is no final answer." if own is None else f"The final answer {own} is wrong."


def check_of(attempt: str, rubric: str) -> str | None:
    """``attempt``'s check under ``rubric`` (``lines`` or ``answer``); ``None`` where it cannot be checked."""
    return line_check(attempt) if rubric == LINES else answer_check(attempt)


def met_items(check: str) -> int:
    """How many rubric items a check marks met (its lines ending in ``yes``): the authors' tie-break among a
    group's equally scored responses, most met first."""
    return sum(line.rstrip().endswith(" " + SAME) for line in check.splitlines())


def guidance(prompt: str, attempt: str, check: str, template: str) -> str:
    """The prompt of a guided regeneration: ``template`` with the question, the failed attempt and its check. The
    default template is the built-in task's retry after a check, ``checked_retry_prompt``."""
    return template.format(prompt=prompt, attempt=attempt.strip(), check=check)


# The default template, the built-in task's retry after a check (docs/roles.md), as a format string.
GUIDANCE_TEMPLATE = checked_retry_prompt("{prompt}", "{attempt}", "{check}")
