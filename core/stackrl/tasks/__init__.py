"""Built-in tasks and the built-in models that know them.

``TASKS`` maps a task name to ``make_dataset(split="train", size=256, seed=0, categories=None) -> Dataset``;
``BUILTIN_MODELS`` maps a model name usable as ``model.name_or_path`` to a callable returning the local folder
of a normal Hugging Face checkpoint (load it with ``from_pretrained``). The roles of the built-in task beyond
solving (judge, retry and corrupt prompts, verdict words, slipped attempts) come from :mod:`stackrl.tasks.roles`,
the task's states and transitions from :mod:`stackrl.tasks.transitions`, its decomposer-solver pipeline from
:mod:`stackrl.tasks.decomposition`, its questions answered by a program from :mod:`stackrl.tasks.programs`; the
text-to-SQL task ``sql`` is :mod:`stackrl.tasks.sql`; ``games`` (the prompts of the environment runner's built-in games) is
:mod:`stackrl.tasks.games`.
"""

from __future__ import annotations

from pathlib import Path

from . import arithmetic, decomposition, games, lookup, programs, roles, sql, transitions
from .roles import (
    CORRECT,
    CORRUPT_MARKER,
    CORRUPT_TEMPLATE,
    DIFFERENT,
    JUDGE_MARKER,
    JUDGE_TEMPLATE,
    RETRY_INSTRUCTION,
    RETRY_TEMPLATE,
    SAME,
    VERDICT_PREFIX,
    WRONG,
    checked_retry_prompt,
    compare_line,
    corrupt_prompt,
    first_wrong_line,
    judge_prompt,
    judged_wrong_step,
    parse_verdict,
    redone_step,
    retry_prompt,
    slip,
    wrong_lines,
)

_ASSETS = Path(__file__).resolve().parent.parent / "assets"


def _shipped(name: str) -> Path:
    path = _ASSETS / name
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} holds no checkpoint; remake it with `python -m stackrl.tasks.pretrain`")
    return path


def arith_tiny_path() -> Path:
    """The folder of the shipped ``stackrl/arith-tiny`` checkpoint (made by ``python -m stackrl.tasks.pretrain``)."""
    return _shipped("arith-tiny")


def arith_skills_path() -> Path:
    """The folder of the shipped ``stackrl/arith-skills`` checkpoint: arith-tiny taught to judge and retry as well
    (its README.md says how it was made and what it can do)."""
    return _shipped("arith-skills")


def arith_roles_path() -> Path:
    """The folder of the shipped ``stackrl/arith-roles`` checkpoint: arith-skills taught as well to corrupt a
    solution, to model the task's transitions and to decompose a question for a solver (its README.md says how it
    was made and what it can do)."""
    return _shipped("arith-roles")


def arith_code_path() -> Path:
    """The folder of the shipped ``stackrl/arith-code`` checkpoint: arith-roles taught as well to answer a question
    with a Python program and to write the SQL query of the ``sql`` task's questions (its README.md says how it was
    made and what it can do)."""
    return _shipped("arith-code")


def arith_games_path() -> Path:
    """The folder of the shipped ``stackrl/arith-games`` checkpoint: arith-tiny taught to play the environment
    runner's built-in games by imitating random legal moves (:mod:`stackrl.tasks.games`; its README.md says how it
    was made and what it can do)."""
    return _shipped("arith-games")


def arith_tools_path() -> Path:
    """The folder of the shipped ``stackrl/arith-tools`` checkpoint: arith-tiny taught to hand some steps to the
    environment runner's calculator and to search the corpus of the task ``lookup`` (:mod:`stackrl.tasks.lookup`;
    its README.md says how it was made and what it can do)."""
    return _shipped("arith-tools")


TASKS = {"arithmetic": arithmetic.make_dataset, "sql": sql.make_dataset, "games": games.make_dataset,
         "lookup": lookup.make_dataset}
ANSWER_FORMATS = {"arithmetic": "answer_is", "lookup": "answer_is"}  # how each task's completions state their answer ("The answer is N.")
BUILTIN_MODELS = {
    "stackrl/arith-tiny": arith_tiny_path,
    "stackrl/arith-skills": arith_skills_path,
    "stackrl/arith-roles": arith_roles_path,
    "stackrl/arith-code": arith_code_path,
    "stackrl/arith-games": arith_games_path,
    "stackrl/arith-tools": arith_tools_path,
}

__all__ = [
    "BUILTIN_MODELS",
    "CORRECT",
    "CORRUPT_MARKER",
    "CORRUPT_TEMPLATE",
    "DIFFERENT",
    "JUDGE_MARKER",
    "JUDGE_TEMPLATE",
    "RETRY_INSTRUCTION",
    "RETRY_TEMPLATE",
    "SAME",
    "TASKS",
    "ANSWER_FORMATS",
    "VERDICT_PREFIX",
    "WRONG",
    "arith_code_path",
    "arith_games_path",
    "arith_roles_path",
    "arith_skills_path",
    "arith_tiny_path",
    "arith_tools_path",
    "arithmetic",
    "checked_retry_prompt",
    "compare_line",
    "corrupt_prompt",
    "decomposition",
    "games",
    "first_wrong_line",
    "lookup",
    "judge_prompt",
    "judged_wrong_step",
    "parse_verdict",
    "programs",
    "redone_step",
    "retry_prompt",
    "roles",
    "slip",
    "sql",
    "transitions",
    "wrong_lines",
]
