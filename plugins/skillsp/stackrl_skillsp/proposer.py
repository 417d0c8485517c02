"""Skill-SP's proposer on the built-in task: the policy writes a new problem for a skill drawn by the controller's
weights, shown problems of that skill only, and the task's reader verifies it (its answer computed, its skill read
from its numbers) before it joins the pool under that skill."""

from __future__ import annotations

import random

from stackrl.blocks.selfplay import common_ending
from stackrl.tasks.arithmetic import read_problem
from stackrl.tasks.posing import parse_problems, request_text


def drawn_skills(weights: dict, count: int, step: int) -> list:
    """``count`` skills drawn with the controller's weights, from a generator seeded by the step: the same draw on
    every process."""
    rng = random.Random(step)
    skills = sorted(weights)
    return rng.choices(skills, weights=[weights[s] for s in skills], k=count)


def verified(text: str, skill: str) -> dict | None:
    """The task a reply poses, when the task's reader reads it as a problem of ``skill``: its question and verified
    answer; ``None`` for a reply that poses no problem of the task or one of another skill."""
    items = parse_problems(text, continued=True)
    problem = read_problem(items[0]) if items else None
    if problem is None or problem["category"] != skill:
        return None
    return {"question": items[0], "answer": str(problem["answer"])}


def propose(ctx, weights: dict, count: int, examples: int, column: str, max_new_tokens: int) -> tuple[list, int]:
    """Pose ``count`` tasks: for each a skill drawn by ``weights``, a request listing ``examples`` of the pool's
    problems of that skill (the first ones, in the pool's order), one generation; the verified tasks are added to
    the pool under their skill. Returns the added rows' (skill, question, answer) and the requests made."""
    pool = ctx.pool
    rows = [pool.row(i) for i in pool.active_rows()]
    ending = common_ending([r[column] for r in rows if isinstance(r.get(column), str)])
    requests, skills = [], []
    for skill in drawn_skills(weights, count, ctx.step):
        shown = [r[column] for r in rows if r.get("category") == skill and isinstance(r.get(column), str)][:examples]
        if shown:
            requests.append(request_text(shown))
            skills.append(skill)
    if not requests:
        return [], 0
    replies = ctx.generate(requests, max_new_tokens=max_new_tokens)
    tasks, seen = [], {r[column].strip() for r in rows if isinstance(r.get(column), str)}
    for skill, reply in zip(skills, replies, strict=True):
        task = verified(reply.text, skill)
        if task is not None and task["question"] not in seen:
            seen.add(task["question"])
            tasks.append((skill, task["question"], task["answer"]))
    if tasks:
        pool.add_rows([{**pool.format_row({column: question + ending}), "answer": answer, "category": skill}
                       for skill, question, answer in tasks])
    return tasks, len(requests)
