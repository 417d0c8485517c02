"""Where each row's hindsight skill comes from: the experience library (``of_prompt``/``search``), or the policy
writing one from the row's completed trajectory; and the token signal the skill induces (``TokenSignals.gap``)."""

from __future__ import annotations

import torch

from stackrl import Rollout
from stackrl.blocks.experience import Experience, ExperienceLibrary
from stackrl.blocks.teacher import teacher_prompts
from stackrl.blocks.tokensignals import SignalContext, TokenSignals

SUCCESS, FAILURE = "success", "failure"


def retrieved_skills(library: ExperienceLibrary, rollout: Rollout, retrieve: str) -> list[str | None]:
    """Each row's skill from the library: the newest record of its own prompt, else (``retrieve`` "similar") the
    record whose prompt is closest to the row's; ``None`` where there is none."""
    skills = []
    for i in range(len(rollout)):
        same = library.of_prompt(rollout.prompt_ids[i])
        if same:
            skills.append(same[-1].artefact)
        elif retrieve == "similar":
            found = library.search(Experience.of_row(rollout, i, 0).prompt, k=1)
            skills.append(found[0][0].artefact if found else None)
        else:
            skills.append(None)
    return skills


def keep_verified(library: ExperienceLibrary, rollout: Rollout, passed: list[bool], step: int) -> int:
    """The raw-trajectory analogue's records: the first passing completion of each group, its text the skill.
    Returns how many were added."""
    added = 0
    for start in range(0, len(rollout), rollout.group_size):
        row = next((i for i in range(start, start + rollout.group_size) if passed[i]), None)
        if row is not None:
            library.add(Experience.of_row(rollout, row, step, artefact=rollout.completions[row], tags=[SUCCESS]))
            added += 1
    return added


def written_skills(ctx, library: ExperienceLibrary, rollout: Rollout, rows: list[int], passed: list[bool],
                   template: str, max_new_tokens: int) -> list[str | None]:
    """The paper's skills: the policy, asked through ``template``, analyses each of ``rows``' completed trajectory
    (prompt, completion, outcome) and writes a skill for it, kept in the library; ``None`` on the other rows and
    where the skill came out empty."""
    skills: list[str | None] = [None] * len(rollout)
    if not rows:
        return skills
    columns = {name: [values[i] for i in rows] for name, values in rollout.columns.items()}
    columns["response"] = [rollout.completions[i] for i in rows]
    columns["outcome"] = [SUCCESS if passed[i] else FAILURE for i in rows]
    requests = teacher_prompts([rollout.prompts[i] for i in rows], columns, template, where="seedrl.analysis_template")
    written = ctx.generate(requests, max_new_tokens=max_new_tokens)
    for i, outcome, generation in zip(rows, columns["outcome"], written):
        text = generation.text.strip()
        if not text:
            ctx.warn("empty_skill")
            continue
        skills[i] = text
        library.add(Experience.of_row(rollout, i, ctx.step, artefact=text, tags=[outcome]))
    return skills


def skill_shift(ctx, template: str, *, teacher: str, temperature: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(shift, covered)``, each ``(N, T)``: ``log pi(y_t | skill context) - log pi(y_t | plain prompt)`` of every
    sampled token (zero on rows without a skill), and the mask of the rows with one."""
    signals = TokenSignals.of(ctx)
    context = SignalContext("seedrl", template)
    return signals.gap(context, model=teacher, temperature=temperature), signals.covered(context)
