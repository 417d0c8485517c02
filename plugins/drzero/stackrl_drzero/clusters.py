"""The cluster key of each row: what HRPO takes for a question's structure (the authors' hop count)."""

from __future__ import annotations

import re

_QUESTION = re.compile(r"What is (.+?)\?")
_OPERATOR = re.compile(r" ([-+*]) ")


def question_text(prompt) -> str:
    """The text of a prompt: itself, or the last message's content for chat messages."""
    if isinstance(prompt, str):
        return prompt
    return str(prompt[-1]["content"]) if prompt else ""


def operators(prompt) -> list[str] | None:
    """The operators of the built-in task's question in ``prompt``, in order (``What is (3 + 4) * 2?``: ``+``,
    ``*``), or None where the prompt holds no such question."""
    found = _QUESTION.search(question_text(prompt))
    return _OPERATOR.findall(found[1]) if found else None


def cluster_keys(rollout, key: str, column: str) -> list:
    """One key a row: rows with equal keys share a baseline. A row whose structure cannot be read (no such
    question in its prompt, no value in the column) keys on its own prompt group, GRPO's group."""
    keys = []
    for i, prompt in enumerate(rollout.prompts):
        if key == "column":
            value = rollout.columns[column][i]
            value = None if value is None else str(value)  # a list or number keys by its text, as a tag would
        else:
            ops = operators(prompt)
            value = None if not ops else len(ops) if key == "steps" else " ".join(ops)
        keys.append(("structure", value) if value is not None else ("prompt", i // rollout.group_size))
    return keys
