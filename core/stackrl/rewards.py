"""Built-in outcome rewards: compare a completion's final answer with the dataset's reference answer.

A reward here is a plain function ``(completion_text, reference_answer) -> float``; the host turns the ones a
config names into reward components (see :mod:`stackrl.trainer`). A plugin that judges completions by these
rewards reads the reference answers of its batch with :func:`reference_answers`, and its config inherits the keys
that name the reward and the column from :class:`OutcomeSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl.answers import answer_after_phrase, extract_answer
from stackrl.errors import ConfigError, PluginError

__all__ = [
    "OUTCOME_REWARDS", "OutcomeSettings", "answer_after_phrase", "exact_match", "extract_answer", "math_verify",
    "reference_answers", "REFLECT", "RESET", "RETRY", "ROLE_COLUMN", "SOLUTION_ROLES", "SOLVE", "VERIFY",
]


# The roles a generate_rollout plugin gives its rows (stackrl.blocks.roles), in the column ROLE_COLUMN: the outcome
# rewards score only the rows of SOLUTION_ROLES, the plugin the others.
ROLE_COLUMN = "role"
SOLVE = "solve"  # answer the dataset's question
VERIFY = "verify"  # judge an attempt shown in the prompt
RETRY = "retry"  # answer again, an earlier attempt (and maybe a reflection on it) shown in the prompt
REFLECT = "reflect"  # write about an earlier attempt, not answer
RESET = "reset"  # continue an earlier attempt from one of its steps to the end
SOLUTION_ROLES = frozenset({SOLVE, RETRY, RESET})  # their completions end in an answer to the dataset's question


def _normalise(answer: str) -> str:
    return answer.replace(",", "").replace(" ", "").rstrip(".").lower()


def exact_match(completion: str, answer: str) -> float:
    """1.0 when the extracted final answer equals the reference after removing spaces and thousands separators."""
    found = extract_answer(completion)
    return float(found is not None and _normalise(found) == _normalise(str(answer)))


def math_verify(completion: str, answer: str) -> float:
    """1.0 when math-verify judges the completion's answer equivalent to the reference (fractions, LaTeX, ...)."""
    from math_verify import parse, verify

    found = extract_answer(completion)
    if found is None:
        return 0.0
    gold = parse(f"${answer}$")
    guess = parse(f"${found}$")
    return float(bool(gold) and bool(guess) and verify(gold, guess))


OUTCOME_REWARDS = {"exact_match": exact_match, "math_verify": math_verify}


def reference_answers(columns: dict[str, list], column: str, *, plugin: str, purpose: str) -> list:
    """The reference answer of every row, from ``columns`` (``ctx.rollout_columns`` or a rollout's ``columns``).

    A ``data.label_free`` run hides the answer column from plugins, so a plugin that cannot work without it fails
    here, naming its ``<plugin>.answer_column`` key and what it needs the answers for: ``purpose``, which follows
    "to" ("tell failed attempts by").
    """
    if column not in columns:
        raise PluginError(
            f"{plugin}.answer_column: the batch has no column '{column}' to {purpose} (a label-free run hides it)"
        )
    return columns[column]


@dataclass
class OutcomeSettings:
    """The config keys of a plugin that judges final answers itself, for its config to inherit: ``metric``, the
    built-in outcome reward (:data:`OUTCOME_REWARDS`) that tells a right answer, and ``answer_column``, the column
    of the reference answers (:func:`reference_answers`).

    A subclass names its ``section`` (in errors); building it checks ``metric``, then runs :meth:`check`, where a
    subclass refuses its other settings.
    """

    section: ClassVar[str] = "outcome"
    metric: str = "exact_match"
    answer_column: str = "answer"

    def __post_init__(self):
        if self.metric not in OUTCOME_REWARDS:
            raise ConfigError(
                f"{self.section}.metric: must be a built-in outcome reward ({', '.join(OUTCOME_REWARDS)}), "
                f"not {self.metric!r}"
            )
        self.check()

    def check(self) -> None:
        """Refuse a subclass's own settings that no run could use (the host has already checked the types)."""

    def is_correct(self, completion: str, answer: str) -> bool:
        """Whether ``completion``'s final answer is ``answer``, by the ``metric`` reward."""
        return bool(OUTCOME_REWARDS[self.metric](completion, answer))
