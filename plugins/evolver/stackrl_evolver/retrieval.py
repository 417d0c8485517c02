"""The glue between the principle library and a prompt: the principles retrieved for a question, written before it
(in a chat prompt, before the text of its last user message)."""

from __future__ import annotations

from stackrl.blocks.experience import Experience

from stackrl_evolver.principles import Principles


def question(prompt) -> str:
    """The text a prompt asks: the prompt itself, or a chat prompt's last user message."""
    if isinstance(prompt, str):
        return prompt
    return next((str(m.get("content", "")) for m in reversed(prompt) if m.get("role") == "user"), "")


def with_principles(prompt, principles: list[Experience], template: str, separator: str):
    """``prompt`` with the texts of ``principles`` before its question, laid out by ``template`` (``{principles}``
    and ``{prompt}``); the prompt itself where none was retrieved."""
    if not principles:
        return prompt
    text = separator.join(p.artefact for p in principles)
    if isinstance(prompt, str):
        return template.format(principles=text, prompt=prompt)
    last = max(i for i, m in enumerate(prompt) if m.get("role") == "user")
    return [{**m, "content": template.format(principles=text, prompt=m["content"])} if i == last else m
            for i, m in enumerate(prompt)]


def retrieved(library: Principles, prompts: list, k: int, group_size: int,
              floor: float = 0.0) -> list[list[Experience]]:
    """Per row, the ``k`` principles closest to its group's question, each at least ``floor`` similar (one search
    per group: a group's rows share their prompt)."""
    out: list[list[Experience]] = []
    for start in range(0, len(prompts), group_size):
        found = library.retrieve(question(prompts[start]), k, floor)
        out.extend([found] * len(prompts[start : start + group_size]))
    return out
