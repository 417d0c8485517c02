"""SPEAR's replay buffer on the experience library: the rows of positive advantage enter with their total reward
and behaviour log-probs, leave after ``tolerate_steps`` (or by lowest reward at capacity); a replayed row's
advantage is recalibrated as its reward less the median of the recent group-mean rewards (the authors' P50
baseline)."""

from __future__ import annotations

import statistics

from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings


class ReplayBuffer:
    def __init__(self, settings: ExperienceSettings, section: str, tolerate_steps: int, baseline_groups: int):
        self.library = ExperienceLibrary(settings, section)
        self.tolerate_steps = tolerate_steps
        self.baseline_groups = baseline_groups
        self.group_means: list[float] = []  # the newest baseline_groups group-mean rewards, oldest first

    def __len__(self) -> int:
        return len(self.library)

    def observe(self, group_means: list[float]) -> None:
        """Add a step's group-mean total rewards to the baseline's window."""
        self.group_means.extend(float(m) for m in group_means)
        del self.group_means[: max(0, len(self.group_means) - self.baseline_groups)]

    def baseline(self) -> float | None:
        """The median of the window's group means (None before any group)."""
        return statistics.median(self.group_means) if self.group_means else None

    def recalibrated(self, record: Experience) -> float:
        """The record's advantage now: its total reward less the baseline (its reward alone before any)."""
        base = self.baseline()
        return record.utility - (0.0 if base is None else base)

    def store(self, record: Experience) -> None:
        self.library.add(record)

    def expire(self, step: int) -> int:
        """Drop the records sampled more than ``tolerate_steps`` before ``step``; how many went."""
        old = [r.key for r in self.library if step - r.step > self.tolerate_steps]
        for key in old:
            self.library.remove(key)
        return len(old)

    def best(self, prompt_ids, k: int) -> list[tuple[Experience, float]]:
        """Up to ``k`` of the prompt's records whose recalibrated advantage is above 0, with it: highest first,
        ties to the newer."""
        scored = [(r, self.recalibrated(r)) for r in reversed(self.library.of_prompt(prompt_ids))]
        scored = [(r, a) for r, a in scored if a > 0]
        return sorted(scored, key=lambda pair: -pair[1])[:k]

    def state_dict(self) -> dict:
        return {"library": self.library.state_dict(), "group_means": list(self.group_means)}

    def load_state_dict(self, state: dict) -> None:
        self.library.load_state_dict(state["library"])
        self.group_means = [float(m) for m in state["group_means"]]
