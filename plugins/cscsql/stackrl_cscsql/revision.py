"""The merge reviser's prompt (CSC-SQL §3.2): the question with its tables, the top groups' queries each with the
rows it returned, then the task's ``SQL:`` marker, after which the reviser writes the final query.

The authors' prompt (``build_merge_generate_prompt`` in their code) puts numbered draft queries, each followed by
its execution result, between the schema and the instructions of their chat prompt. The built-in SQL task's
prompt ends with ``SQL:``; this one inserts the drafts before that marker, in the task's own line format.
"""

from __future__ import annotations

from stackrl.blocks.sandbox import SqlResult
from stackrl.tasks.sql import SQL_MARKER, result_text

DRAFTS = "Drafts:"


def shown_result(result: SqlResult, max_rows: int) -> str:
    """A draft's result as the task writes answers (rows sorted, ``, `` and ``; ``), cut at ``max_rows`` rows."""
    rows = sorted(map(tuple, result.rows), key=repr)
    text = result_text(rows[:max_rows])
    return text + (" ..." if len(rows) > max_rows else "")


def reviser_prompt(question: str, drafts: list[str], results: list[SqlResult], max_rows: int = 5) -> str:
    """``question`` (a prompt of the SQL task, ending with its marker) with the numbered ``drafts`` and their
    results before the marker."""
    head, marker, tail = question.rpartition(SQL_MARKER)
    if not marker:
        raise ValueError(f"reviser_prompt: the question has no {SQL_MARKER!r} marker")
    lines = [DRAFTS]
    for number, (draft, result) in enumerate(zip(drafts, results), start=1):
        lines.append(f"{number}. {draft.strip()}")
        lines.append(f"Result: {shown_result(result, max_rows)}")
    return f"{head}{chr(10).join(lines)}\n{marker}{tail}"


def is_reviser_prompt(prompt) -> bool:
    """Whether ``prompt`` is already a merge prompt (its rows are revised once, not merged again)."""
    return isinstance(prompt, str) and f"\n{DRAFTS}\n" in prompt
