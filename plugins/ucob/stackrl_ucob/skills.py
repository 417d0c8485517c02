"""UCOB's skill memory over the experience library: utility-aware retrieval and the baseline-relative utility update.

A skill is a record of :class:`stackrl.blocks.experience.ExperienceLibrary`; on the built-in task it is a raw
trajectory (a stored completion of a similar prompt, shown before the question). Its utility is the running
judgement of the skill, moved after every use by how the skill view did against the plain view of the same prompt;
each record's use count feeds the exploration bonus of the retrieval score. Facts from the authors' code
(TU2021/UCOB, ``agent_system/memory/reflection_memory.py``): the score, the update and their defaults.
"""

from __future__ import annotations

import math

from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings


def relative_score(skill_mean: float, plain_mean: float) -> float:
    """What one use of a skill scores: ``0.5 + 0.5 * (skill view's mean return - plain view's)``, within [0, 1]
    (0.5: the skill made no difference)."""
    return min(1.0, max(0.0, 0.5 + 0.5 * (skill_mean - plain_mean)))


def updated_utility(utility: float, score: float, beta: float) -> float:
    """The utility after a use scoring ``score``: an exponential moving average with step ``beta``."""
    return (1.0 - beta) * utility + beta * score


def retrieval_score(relevance: float, utility: float, uses: int, total_uses: int, *, alpha: float,
                    ucb_scale: float) -> float:
    """``alpha * relevance + (1 - alpha) * (utility + ucb_scale * sqrt(ln(total_uses) / uses))``: similarity and
    utility, with an exploration bonus for a record used less than the others."""
    bonus = ucb_scale * math.sqrt(math.log(max(total_uses, 1)) / max(uses, 1)) if ucb_scale else 0.0
    return alpha * relevance + (1.0 - alpha) * (utility + bonus)


class SkillMemory:
    """The library of skills and each one's use count (a new record counts 1, as in the authors' memory)."""

    def __init__(self, settings: ExperienceSettings, section: str):
        self.library = ExperienceLibrary(settings, section)
        self.uses: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.library)

    def add(self, record: Experience) -> None:
        for evicted in self.library.add(record):
            self.uses.pop(evicted.key, None)
        if record.key in self.library:
            self.uses[record.key] = 1

    def retrieve(self, query: str, *, threshold: float, top_m: int, alpha: float,
                 ucb_scale: float) -> tuple[Experience, float] | None:
        """The record of highest :func:`retrieval_score` among the ``top_m`` most similar to ``query`` whose
        similarity is at least ``threshold``, with its similarity; ``None`` when none is. Ties: the more similar."""
        found = [(r, s) for r, s in self.library.search(query, top_m) if s >= threshold]
        if not found:
            return None
        total = sum(self.uses.values())
        return max(found, key=lambda pair: retrieval_score(pair[1], pair[0].utility, self.uses.get(pair[0].key, 1),
                                                            total, alpha=alpha, ucb_scale=ucb_scale))

    def credit(self, key: str, score: float, beta: float) -> None:
        """One use of record ``key`` scoring ``score``: its utility moves toward it, its use count grows."""
        if key in self.library:
            self.library.set_utility(key, updated_utility(self.library.get(key).utility, score, beta))
            self.uses[key] = self.uses.get(key, 1) + 1

    def state_dict(self) -> dict:
        return {"library": self.library.state_dict(), "uses": [[k, n] for k, n in self.uses.items()]}

    def load_state_dict(self, state: dict) -> None:
        self.library.load_state_dict(state["library"])
        self.uses = {k: int(n) for k, n in state["uses"] if k in self.library}
