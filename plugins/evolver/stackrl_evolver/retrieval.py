"""The glue between the principle library and a prompt: the principles retrieved for a question, written before it."""

from __future__ import annotations

from stackrl.blocks.experience import Experience

from stackrl_evolver.principles import Principles


def with_principles(prompt: str, principles: list[Experience], template: str, separator: str) -> str:
    """``prompt`` with the texts of ``principles`` before it, laid out by ``template`` (``{principles}`` and
    ``{prompt}``); the prompt itself where none was retrieved."""
    if not principles:
        return prompt
    return template.format(principles=separator.join(p.artefact for p in principles), prompt=prompt)


def retrieved(library: Principles, prompts: list[str], k: int, group_size: int,
              floor: float = 0.0) -> list[list[Experience]]:
    """Per row, the ``k`` principles closest to its group's prompt, each at least ``floor`` similar (one search per
    group: a group's rows share their prompt)."""
    out: list[list[Experience]] = []
    for start in range(0, len(prompts), group_size):
        found = library.retrieve(prompts[start], k, floor)
        out.extend([found] * len(prompts[start : start + group_size]))
    return out
