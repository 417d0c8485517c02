"""SEIF's Filter, Judger and the Instructor's reward on the built-in task, and the alternation of the two trained roles.

The Instructor's reply poses an instruction (here a question of the task, the first item of a numbered list); the
Filter refuses what no follower could be asked to follow (:func:`rejection`); the Judger checks each of the
Follower's answers against what the instruction asks (the task's own verifier, :func:`judged`); the Instructor earns
the share of the Follower's answers that fail (:func:`instructor_reward`, the authors' ``1 - adherence``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from stackrl.answers import equivalent
from stackrl.blocks.selfinstruct import SelfInstructSettings, rule_rejection
from stackrl.tasks.arithmetic import read_problem

REJECTIONS = ("empty", "length", "banned", "form", "invalid", "repeat")  # the Filter's reasons, in the order checked


class Role(str, Enum):
    """Which role trains at a step."""

    instructor = "instructor"
    follower = "follower"


def normalised(question: str) -> str:
    """A question as the Filter compares it with the ones it knows: whitespace collapsed."""
    return " ".join(question.split())


def rejection(question: Optional[str], known: set, rules: SelfInstructSettings) -> Optional[str]:
    """Why the Filter refuses ``question`` (a name of :data:`REJECTIONS`), or ``None`` for one the Follower is given.

    ``empty``: the reply posed nothing; ``length``/``banned``/``form``: the self-instruction rules
    (:func:`stackrl.blocks.selfinstruct.rule_rejection`); ``invalid``: not a problem of the task, so nothing could
    follow it (:func:`stackrl.tasks.arithmetic.read_problem`: a chain the task cannot write, a negative value, a
    multiplier outside 2-9, text that is not a question); ``repeat``: one of the questions in ``known`` (the topic's
    examples and the questions waiting in the pool), written out again."""
    if question is None or not question.strip():
        return "empty"
    reason = rule_rejection(question, rules)
    if reason is not None:
        return reason
    if read_problem(normalised(question)) is None:
        return "invalid"
    if normalised(question) in known:
        return "repeat"
    return None


def truth(question: str) -> Optional[str]:
    """The answer the task's verifier expects for ``question`` (``None`` for one that is not a problem of the task:
    nothing follows it)."""
    problem = read_problem(normalised(question))
    return None if problem is None else str(problem["answer"])


def judged(answer: Optional[str], expected: Optional[str], math_verify: bool = False) -> bool:
    """The Judger: whether one of the Follower's answers follows the instruction (an answer equal to ``expected``;
    a reply without an answer does not, nor any answer to an instruction without one)."""
    return answer is not None and expected is not None and equivalent(answer, expected, math_verify)


def instructor_reward(verdicts: list[bool]) -> float:
    """The Instructor's reward for an instruction the Follower answered ``len(verdicts)`` times: the share of those
    answers the Judger failed, ``1 - adherence`` (1: the Follower never followed it; 0: always)."""
    if not verdicts:
        raise ValueError("instructor_reward needs at least one judged answer")
    return 1.0 - sum(verdicts) / len(verdicts)


@dataclass(frozen=True)
class Schedule:
    """The alternation: each turn trains the Instructor for ``instructor_steps`` steps, then the Follower for
    ``follower_steps`` (``first_follower_steps`` in the first turn, the authors' longer first Follower stage)."""

    instructor_steps: int
    follower_steps: int
    first_follower_steps: int

    def role(self, step: int) -> Role:
        """The role that trains the step of index ``step`` (0 for the first step: the rollout of ``ctx.step``)."""
        first = self.instructor_steps + self.first_follower_steps
        if step < first:
            return Role.instructor if step < self.instructor_steps else Role.follower
        position = (step - first) % (self.instructor_steps + self.follower_steps)
        return Role.instructor if position < self.instructor_steps else Role.follower

    def turn_starts(self, step: int) -> bool:
        """Whether the step of index ``step`` is the first of an Instructor stage (a new turn)."""
        return self.role(step) == Role.instructor and (step == 0 or self.role(step - 1) == Role.follower)
