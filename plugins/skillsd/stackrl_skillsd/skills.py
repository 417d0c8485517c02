"""The glue between the experience library and the teacher's context: which successes become skills, and each
row's skill, retrieved by the similarity of its prompt to the prompts the skills came from."""

from __future__ import annotations

from stackrl import Rollout
from stackrl.blocks.experience import Experience, ExperienceLibrary
from stackrl.blocks.teacher import teacher_prompts

SUCCESS = "success"  # the tag of a skill drawn from a successful completion


def first_successes(rollout: Rollout, passed: list[bool]) -> list[int]:
    """Each group's first row that passed: the trajectories the step turns into skills."""
    size = rollout.group_size
    firsts = []
    for start in range(0, len(rollout), size):
        row = next((i for i in range(start, start + size) if passed[i]), None)
        if row is not None:
            firsts.append(row)
    return firsts


def summary_requests(rollout: Rollout, rows: list[int], template: str, where: str) -> list:
    """The summariser's prompt for each of ``rows``: ``template`` over the row's prompt and ``{completion}``."""
    sub = rollout.select(rows)
    return teacher_prompts(sub.prompts, {**sub.columns, "completion": sub.completions}, template, where=where)


def remember(library: ExperienceLibrary, rollout: Rollout, rows: list[int], skills: list[str], step: int) -> int:
    """Add the skill of each of ``rows`` (its prompt's record replaces an older one); how many were added."""
    for row, skill in zip(rows, skills, strict=True):
        library.add(Experience.of_row(rollout, row, step, artefact=skill, tags=[SUCCESS]))
    return len(rows)


def retrieve(library: ExperienceLibrary, rollout: Rollout, min_similarity: float = 0.0) -> list[str | None]:
    """Each row's skill: the artefact of the stored success whose prompt is most like the row's (its own prompt's
    when it has one), one query per group; ``None`` while the library holds no success whose prompt's similarity
    reaches ``min_similarity``."""
    skills: list[str | None] = []
    for start in range(0, len(rollout), rollout.group_size):
        query = Experience.of_row(rollout, start, 0).prompt
        found = library.search(query, k=1, tags=[SUCCESS])
        skill = found[0][0].artefact if found and found[0][1] >= min_similarity else None
        skills.extend([skill] * rollout.group_size)
    return skills
