"""Asymmetric self-play: the policy poses a question, then solves it several times, and the agreement of its answers
rates the question.

What the proposer-solver methods share (SQLM's proposer, R-Zero-style challengers such as R-Diverse's): the question
a proposer's reply poses, the prompt the solver is asked with (the run's own prompt format, learnt from
``ctx.pool.format_row``), the solver's sub-rollouts sampled in the reward stage (``ctx.generate``, the same call
on every process) with their answers clustered (:func:`stackrl.answers.group_answers`), the majority answer and
the share of answers that agree with it, and the proposer's rewards made of that agreement: SQLM's band (neither
unanimous nor without a majority) and R-Zero's uncertainty (highest at an even split).

The authors of both count a sub-rollout without an answer as one more answer ("none"): when those are the most
common, there is no majority and no answer agrees (:func:`majority`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from stackrl.answers import GroupAnswers, group_answers
from stackrl.tasks.posing import parse_problems

_MARKER = "\u0000question\u0000"  # stands for the question while the run's prompt format is learnt


def posed_question(text: str, numbered: bool = True) -> Optional[str]:
    """The question a proposer's reply poses, whitespace collapsed; ``None`` for an empty one.

    ``numbered``: the reply continues a numbered list whose request ended with the next number
    (:func:`stackrl.tasks.posing.request_text`), and the question is its first item; otherwise the whole reply.
    """
    if numbered:
        items = parse_problems(text, continued=True)
        return items[0] if items else None
    question = " ".join(text.split())
    return question or None


def common_ending(texts: list[str]) -> str:
    """The trailing whitespace every one of ``texts`` ends with ("" for none): the built-in task's questions end in a
    newline, after which the model solves them, so a posed question gets it too."""
    if not texts:
        return ""
    endings = [text[len(text.rstrip()):] for text in texts]
    shortest = min(endings, key=len)
    return shortest if all(ending.endswith(shortest) for ending in endings) else ""


class QuestionPrompts:
    """The prompt a posed question is solved from, as the run makes its prompts: built where ``ctx.pool`` is given
    (``train_begin``, ``post_step``) and used in the reward stage, which has no pool.

    ``column`` is the dataset column of a problem's text (the one ``data.prompt_template`` names); ``ending`` the
    trailing whitespace the run's problems end with (:func:`common_ending` of the pool's rows, by default).
    """

    def __init__(self, pool, column: str, ending: Optional[str] = None):
        self.column = column
        if ending is None:
            texts = [pool.row(i).get(column) for i in pool.active_rows()]
            ending = common_ending([t for t in texts if isinstance(t, str)])
        self.ending = ending
        self.template = pool.format_row({column: _MARKER})["prompt"]

    def text(self, question: str) -> str:
        """The problem column's value for ``question``: the question with the run's problems' ending."""
        return question + self.ending

    def __call__(self, question: str):
        """The prompt of ``question`` (text, or chat messages in a chat run)."""
        filled = self.text(question)
        if isinstance(self.template, str):
            return self.template.replace(_MARKER, filled)
        return [{**message, "content": message["content"].replace(_MARKER, filled)} for message in self.template]


@dataclass(frozen=True)
class Majority:
    """The majority of one question's solver answers: ``answer`` (``None`` when there is none), ``votes`` (the
    answers that agree with it; 0 without one) of ``samples``, and which rows agree (``agrees``)."""

    answer: Optional[str]
    votes: int
    samples: int
    agrees: tuple[bool, ...]

    @property
    def agreement(self) -> float:
        """The share of the samples that agree with the majority answer (0 without one)."""
        return self.votes / self.samples if self.samples else 0.0


def majority(group: GroupAnswers, unanswered_votes: bool = True) -> Majority:
    """The majority of a group's answers. With ``unanswered_votes`` (the authors' count), the rows without an answer
    are one more answer: when they outnumber the most common answer, or tie with it and come first, there is no
    majority. Without it they never make one."""
    chosen = group.majority
    unanswered = group.size - group.answered
    if chosen is not None and unanswered_votes and unanswered:
        first_none = group.index.index(None)
        first_chosen = group.index.index(chosen)
        count = group.counts[chosen]
        if unanswered > count or (unanswered == count and first_none < first_chosen):
            chosen = None
    if chosen is None:
        return Majority(None, 0, group.size, tuple(False for _ in group.index))
    agrees = tuple(k == chosen for k in group.index)
    return Majority(group.distinct[chosen], sum(agrees), group.size, agrees)


def solve(ctx, prompts: list, samples: int, read: Callable[[str], Optional[str]], *, math_verify: bool = True,
          **sampling) -> list[GroupAnswers]:
    """The solver's sub-rollouts: ``samples`` completions of each of ``prompts`` in one ``ctx.generate`` call
    (the same call on every process, so every process gets the same answers), each group's answers read by
    ``read`` and clustered. ``sampling`` overrides the run's generation settings."""
    if not prompts:
        return []
    generations = ctx.generate([prompt for prompt in prompts for _ in range(samples)], **sampling)
    answers = [read(generation.text) for generation in generations]
    return [group_answers(answers[i * samples:(i + 1) * samples], math_verify) for i in range(len(prompts))]


def band_reward(votes: int, samples: int, min_votes: int = 1) -> float:
    """SQLM's proposer reward: 1 when more than ``min_votes`` and fewer than all ``samples`` answers agree with the
    majority (neither too easy, every answer the same, nor too hard, no answer shared), else 0."""
    return 1.0 if min_votes < votes < samples else 0.0


def uncertainty_reward(agreement: float) -> float:
    """R-Zero's challenger reward ``1 - 2 |p - 1/2|`` of the solver's agreement ``p`` with its majority answer: 1 at
    an even split, 0 when every answer agrees or none does."""
    return 1.0 - 2.0 * abs(agreement - 0.5)
