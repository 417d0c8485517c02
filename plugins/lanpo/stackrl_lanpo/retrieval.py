"""The glue between LANPO's experience pool and a context: which stored trials a prompt is shown.

Both choices read only the records' texts and their order in the library, never their rewards, so what reaches a
prompt is reward-agnostic: the same library with other rewards shows every prompt the same trials.
"""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.experience import Experience, ExperienceLibrary


def own_trials(library: ExperienceLibrary, prompt_ids: Sequence[int], n: int) -> list[Experience]:
    """Reward-Agnostic Reflection's trials: the ``n`` newest stored trials of this very question, newest first,
    cycling through them when fewer are stored (empty when none is)."""
    stored = library.of_prompt(prompt_ids)[::-1]
    return [stored[i % len(stored)] for i in range(n)] if stored else []


def related_trials(library: ExperienceLibrary, query: str, prompt_ids: Sequence[int], k: int,
                   min_relevance: float) -> list[Experience]:
    """Relevant Abstraction's trials: the ``k`` stored trials of *other* questions whose indexed text is closest to
    ``query`` (best first, ties to the newer), each scoring above ``min_relevance``."""
    own = tuple(prompt_ids)
    found = library.search(query, k + len(library.of_prompt(own)))
    return [record for record, score in found if record.prompt_key != own and score > min_relevance][:k]
