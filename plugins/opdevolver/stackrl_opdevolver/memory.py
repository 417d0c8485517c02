"""The glue between the experience library and a context: retrieval of a prompt's candidates, the memory text a
prompt shows, which rows of a group read which candidate, and the outcome-calibrated attribution of a record."""

from __future__ import annotations

import math
from collections.abc import Sequence

from stackrl.blocks.experience import Experience, ExperienceLibrary, prompt_text


def candidates(library: ExperienceLibrary, prompt, k: int, min_utility: float) -> list[Experience]:
    """The ``k`` records closest to ``prompt`` (the library's retrieval over the indexed text), best first,
    leaving out those whose attributed utility fell below ``min_utility``."""
    found = library.search(prompt_text(prompt), len(library))
    return [record for record, _ in found if record.utility >= min_utility][:k]


def memory_text(records: Sequence[Experience], template: str) -> str:
    """The records as the memory a prompt shows, each through ``template`` ({prompt}, {completion})."""
    return "".join(template.format(prompt=r.prompt, completion=r.completion) for r in records)


def reading_plan(group_size: int, reading_rows: int, keys: Sequence[str]) -> list[str | None]:
    """Which candidate each row of a group reads: the first ``group_size - reading_rows`` rows are plain (None),
    the others go round the candidates ``keys`` in order; every row is plain when there is no candidate."""
    plain = group_size - reading_rows
    return [None if j < plain or not keys else keys[(j - plain) % len(keys)] for j in range(group_size)]


def attribution_gap(outcomes: Sequence[float], used: Sequence[bool]) -> float | None:
    """The with/without contrast of one record in one group: the mean outcome of the rows that read it minus the
    mean outcome of the group's rows that did not; None when either side is empty."""
    with_it = [o for o, u in zip(outcomes, used) if u]
    without = [o for o, u in zip(outcomes, used) if not u]
    if not with_it or not without:
        return None
    return sum(with_it) / len(with_it) - sum(without) / len(without)


def updated_utility(utility: float, gap: float, rate: float) -> float:
    """The record's running utility moved ``rate`` of the way to this group's gap."""
    value = utility + rate * (gap - utility)
    return value if math.isfinite(value) else utility
