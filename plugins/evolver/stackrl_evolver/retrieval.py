"""The glue between the principle library and a prompt: the principles retrieved for a question, written before it
(in a chat prompt, before the text of its last user message, as the self-teacher block formats a teacher prompt)."""

from __future__ import annotations

from stackrl.blocks.experience import Experience, prompt_text
from stackrl.blocks.teacher import teacher_prompts

from stackrl_evolver.principles import Principles


def with_principles(prompt, principles: list[Experience], template: str, separator: str):
    """``prompt`` with the texts of ``principles`` before its question, laid out by ``template`` (``{principles}``
    and ``{prompt}``); the prompt itself where none was retrieved."""
    if not principles:
        return prompt
    text = separator.join(p.artefact for p in principles)
    return teacher_prompts([prompt], {"principles": [text]}, template, where="evolver.template")[0]


def retrieved(library: Principles, prompts: list, k: int, group_size: int,
              floor: float = 0.0) -> list[list[Experience]]:
    """Per row, the ``k`` principles closest to its group's question, each at least ``floor`` similar (one search
    per group: a group's rows share their prompt)."""
    out: list[list[Experience]] = []
    for start in range(0, len(prompts), group_size):
        found = library.retrieve(prompt_text(prompts[start]), k, floor)
        out.extend([found] * len(prompts[start : start + group_size]))
    return out
