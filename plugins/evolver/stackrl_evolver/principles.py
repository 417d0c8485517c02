"""EvolveR's principle repository and its lifecycle: each principle's score from how often the rows that were shown
it succeeded, distillation of successes into principles (a near-duplicate merged into the principle it repeats),
and pruning of the principles whose score fell below a threshold.

A principle is an :class:`~stackrl.blocks.experience.Experience` tagged ``principle`` whose ``artefact`` is its
text; its use and success counts are kept beside the library (a principle evicted or pruned loses them).
"""

from __future__ import annotations

from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings
from stackrl.blocks.selfinstruct import rouge_l

TAG = "principle"
# The principles closest to a new candidate that are compared with it for a merge (the authors' TOP_K_PRINCIPLES).
MERGE_CANDIDATES = 3


def score(successes: int, uses: int) -> float:
    """A principle's score: its success rate over the rows that used it, Laplace-smoothed, ``(s + 1) / (u + 2)``
    (the authors' ``metric_score``); 0.5 for a principle nobody used yet."""
    return (successes + 1) / (uses + 2)


class Principles:
    """The repository: an experience library of principles and each principle's ``[uses, successes]``."""

    def __init__(self, settings: ExperienceSettings, section: str, merge_threshold: float):
        self.library = ExperienceLibrary(settings, section)
        self.merge_threshold = merge_threshold
        self.counts: dict[str, list[int]] = {}  # key -> [uses, successes]

    def __len__(self) -> int:
        return len(self.library)

    def score(self, key: str) -> float:
        return score(self.counts[key][1], self.counts[key][0])

    def retrieve(self, question: str, k: int, floor: float = 0.0) -> list[Experience]:
        """The ``k`` principles whose text is lexically closest to ``question`` (ROUGE-L F or BM25 above 0 and at
        least ``floor``), best first."""
        return [record for record, similarity in self.library.search(question, k, tags=[TAG]) if similarity >= floor]

    def credit(self, key: str, success: bool) -> None:
        """One more use of principle ``key``, a success if ``success``; its score follows."""
        if key not in self.counts:  # pruned or evicted since it was shown
            return
        self.counts[key][0] += 1
        self.counts[key][1] += bool(success)
        self.library.set_utility(key, self.score(key))

    def distill(self, candidates: list[Experience]) -> tuple[int, int]:
        """Take in this step's candidate principles (each an ``Experience`` with its text as ``artefact``, from a
        success): a candidate whose text repeats (ROUGE-L F at least ``merge_threshold``) one taken before it this
        step is dropped; one that repeats some of the ``MERGE_CANDIDATES`` kept principles closest to it is merged into each of them (one more use and
        success); any other becomes a new principle, unused (score 0.5). Returns (merged, created)."""
        unique: list[Experience] = []
        for candidate in candidates:
            if all(rouge_l(candidate.artefact, kept.artefact) < self.merge_threshold for kept in unique):
                unique.append(candidate)
        merged = created = 0
        for candidate in unique:
            matches = [record for record, similarity in self.library.search(candidate.artefact, MERGE_CANDIDATES,
                                                                              tags=[TAG])
                       if similarity >= self.merge_threshold]
            if matches:
                merged += 1
                for record in matches:
                    self.credit(record.key, True)
                continue
            candidate.tags = [TAG]
            candidate.utility = score(0, 0)
            for evicted in self.library.add(candidate):
                self.counts.pop(evicted.key, None)
            if candidate.key in self.library:
                self.counts[candidate.key] = [0, 0]
                created += 1
        return merged, created

    def prune(self, threshold: float) -> list[str]:
        """Remove the principles whose score is below ``threshold``; their keys."""
        low = [record.key for record in self.library if self.score(record.key) < threshold]
        for key in low:
            self.library.remove(key)
            del self.counts[key]
        return low

    def state_dict(self) -> dict:
        return {"library": self.library.state_dict(), "counts": {k: list(v) for k, v in self.counts.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.library.load_state_dict(state["library"])
        self.counts = {k: list(v) for k, v in state["counts"].items() if k in self.library}
