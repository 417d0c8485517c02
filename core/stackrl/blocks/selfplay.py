"""Asymmetric self-play: the policy poses a question, then solves it several times, and the agreement of its answers
rates the question.

What the proposer-solver methods share (SQLM's proposer, R-Zero-style challengers such as R-Diverse's): the pool's
topic row and the posed questions that join it (:class:`SelfPlayPool`), the question a proposer's reply poses, the prompt the solver is asked with (the run's own prompt format, learnt from
``ctx.pool.format_row``), the solver's sub-rollouts sampled in the reward stage (``ctx.generate``, the same call
on every process) with their answers clustered (:func:`stackrl.answers.group_answers`), the majority answer and
the share of answers that agree with it, and the proposer's rewards made of that agreement: SQLM's band (neither
unanimous nor without a majority) and R-Zero's uncertainty (highest at an even split).

The authors of both count a sub-rollout without an answer as one more answer ("none"): when those are the most
common, there is no majority and no answer agrees (:func:`majority`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from stackrl.answers import AnswerSettings, GroupAnswers, equivalent, group_answers
from stackrl.errors import ConfigError, PluginError
from stackrl.hookspecs import hookimpl
from stackrl.plugin import Plugin
from stackrl.pool import CATEGORY_COLUMN
from stackrl.tasks.posing import parse_problems, request_text

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


def solutions(ctx, prompts: list, samples: int, read: Callable[[str], Optional[str]], *, math_verify: bool = True,
              **sampling) -> list[tuple[list[str], GroupAnswers]]:
    """The solver's sub-rollouts: ``samples`` completions of each of ``prompts`` in one ``ctx.generate`` call
    (the same call on every process, so every process gets the same answers), each group's texts with its answers
    read by ``read`` and clustered. ``sampling`` overrides the run's generation settings."""
    if not prompts:
        return []
    generations = ctx.generate([prompt for prompt in prompts for _ in range(samples)], **sampling)
    texts = [generation.text for generation in generations]
    answers = [read(text) for text in texts]
    return [(texts[i * samples:(i + 1) * samples], group_answers(answers[i * samples:(i + 1) * samples], math_verify))
            for i in range(len(prompts))]


def solve(ctx, prompts: list, samples: int, read: Callable[[str], Optional[str]], *, math_verify: bool = True,
          **sampling) -> list[GroupAnswers]:
    """The clustered answers of :func:`solutions` (the texts dropped)."""
    return [group for _, group in solutions(ctx, prompts, samples, read, math_verify=math_verify, **sampling)]


def band_reward(votes: int, samples: int, min_votes: int = 1) -> float:
    """SQLM's proposer reward: 1 when more than ``min_votes`` and fewer than all ``samples`` answers agree with the
    majority (neither too easy, every answer the same, nor too hard, no answer shared), else 0."""
    return 1.0 if min_votes < votes < samples else 0.0


def uncertainty_reward(agreement: float) -> float:
    """R-Zero's challenger reward ``1 - 2 |p - 1/2|`` of the solver's agreement ``p`` with its majority answer: 1 at
    an even split, 0 when every answer agrees or none does."""
    return 1.0 - 2.0 * abs(agreement - 0.5)


# -- the pool: one topic row, the posed questions ----------------------------------------------------------------


def topic_prompt(pool, topic: Optional[str], examples: int, column: str):
    """The proposer's one prompt: ``topic``, or a pose request listing ``examples`` of the pool's problems
    (:func:`stackrl.tasks.posing.request_text`); chat messages in a chat run."""
    if topic is None:
        problems = [pool.row(i).get(column) for i in pool.active_rows()]
        problems = [p for p in problems if isinstance(p, str)][:examples]
        if not problems:
            raise PluginError(f"no row of the pool has a '{column}' to show in the topic prompt; give the topic or "
                              "the column of the dataset's problems")
        topic = request_text(problems)
    return [{"role": "user", "content": topic}] if pool.chat else topic


class SelfPlayPool:
    """The prompt pool of a proposer-solver method named ``section``: one topic row (category
    ``<section>/propose``), the questions posed at each step as label-free rows (``<section>/solve``, the problem in
    ``column``), each drawn once and then retired, and the draw: the topic row at ``proposer_share`` of the problems
    and the posed questions at the rest (the topic alone while none exists), the dataset's rows never unless
    ``train_on_dataset`` (then the categories are left alone). While another plugin has retired the topic row (a
    switch of data set), nothing is weighed."""

    def __init__(self, section: str, column: str, proposer_share: float, train_on_dataset: bool = False):
        self.propose, self.solve = f"{section}/propose", f"{section}/solve"
        self.column, self.share, self.train_on_dataset = column, proposer_share, train_on_dataset

    def begin(self, pool, topic) -> QuestionPrompts:
        """At ``train_begin``: the topic row added (a resumed run finds it restored) and the draw weighed; returns
        the solver's prompt format."""
        if not self.rows(pool, self.propose, active=False):
            pool.add_rows([{"prompt": topic, CATEGORY_COLUMN: self.propose}])
        self._weigh(pool)
        return QuestionPrompts(pool, self.column)

    def after_step(self, pool, prompts: QuestionPrompts, questions: list, columns: Optional[list] = None) -> list[int]:
        """At ``post_step``: the posed questions drawn in the last batch retired, ``questions`` (each with its
        ``columns``, a dict, where given) added but for repeats of a waiting one, the draw weighed; the new ids."""
        pool.retire([row for row in pool.last_batch if pool.stats(row).category == self.solve
                     and not pool.stats(row).retired])
        waiting = {pool.row(row)[self.column] for row in self.rows(pool, self.solve)}
        rows = []
        for n, question in enumerate(questions):
            text = prompts.text(question)
            if text not in waiting:
                waiting.add(text)
                extra = columns[n] if columns else {}
                rows.append(pool.format_row({self.column: text, CATEGORY_COLUMN: self.solve, **extra}))
        ids = pool.add_rows(rows) if rows else []
        self._weigh(pool)
        return ids

    def proposer_rows(self, rollout) -> list[bool]:
        """Whether each row of a rollout is a completion of the topic row."""
        return [c == self.propose for c in rollout.columns.get(CATEGORY_COLUMN, [None] * len(rollout))]

    def rows(self, pool, category: str, active: bool = True) -> list[int]:
        return [row for row in (pool.active_rows() if active else range(len(pool)))
                if pool.stats(row).category == category]

    def _weigh(self, pool) -> None:
        if self.train_on_dataset or not self.rows(pool, self.propose):
            return
        solving = self.rows(pool, self.solve)
        weights = {self.propose: self.share, self.solve: 1.0 - self.share} if solving else {self.propose: 1.0}
        if weights != pool.category_weights:
            pool.set_category_weights(weights)


# -- the reward stage ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Posed:
    """A proposer row: its question (``None``: it posed nothing, and was not solved) and the majority of the
    solver's answers to it."""

    row: int
    question: Optional[str]
    vote: Optional[Majority]


def rate(ctx, rows: list[int], prompts: QuestionPrompts, samples: int, read: Callable[[str], Optional[str]], *,
         numbered: bool = True, math_verify: bool = True, unanswered_votes: bool = True, **sampling) -> list[Posed]:
    """The proposer rows ``rows`` of ``ctx.rollout``: each one's question solved ``samples`` times (one
    ``ctx.generate`` call for all) and the majority of the answers."""
    questions = {i: posed_question(ctx.rollout.completions[i], numbered) for i in rows}
    asked = [i for i in rows if questions[i] is not None]
    groups = solve(ctx, [prompts(questions[i]) for i in asked], samples, read, math_verify=math_verify, **sampling)
    votes = {i: majority(group, unanswered_votes) for i, group in zip(asked, groups)}
    return [Posed(i, questions[i], votes.get(i)) for i in rows]


def solver_majorities(answers: list, group_size: int, skip: list[bool], math_verify: bool = True,
                      unanswered_votes: bool = True) -> dict[int, Majority]:
    """The majority of each group of a rollout's ``answers`` (row ``i`` in group ``i // group_size``) whose first
    row is not in ``skip`` (a proposer's group), by group number."""
    return {g: majority(group_answers(answers[start:start + group_size], math_verify), unanswered_votes)
            for g, start in enumerate(range(0, len(answers), group_size)) if not skip[start]}


def labelled_rewards(ctx, rewards, proposer: list[bool], column: str, read: Callable[[str], Optional[str]],
                     math_verify: bool = True) -> int:
    """The solver's rows of ``ctx.rollout`` whose pool row carries a pseudo-label in ``column`` (set when its
    question was posed): ``rewards[i]`` 1 where the row's answer, read by ``read``, is equivalent to the label, else 0;
    the proposer's rows and rows without a label left as they are. The labels are declared as the rows'
    pseudo-labels. Returns how many rows were scored."""
    rollout = ctx.rollout
    labels = rollout.columns.get(column, [None] * len(rollout))
    scored = 0
    for i, (p, label) in enumerate(zip(proposer, labels)):
        if p or label is None:
            continue
        answer = read(rollout.completions[i])
        rewards[i] = float(answer is not None and equivalent(answer, label, math_verify))
        scored += 1
    ctx.declare_pseudo_labels([None if p else label for p, label in zip(proposer, labels)])
    return scored


# -- what a proposer-solver plugin shares: its settings and its pool hooks ---------------------------------------------


@dataclass
class SelfPlaySettings(AnswerSettings):
    """The settings a proposer-solver plugin's ``Config`` inherits (with the answers' ``answer_extractor``,
    ``answer_regex`` and ``math_verify``), checked for the subclass's ``section`` when it is built."""

    # The proposer's one prompt. None: a pose request listing `topic_examples` of the dataset's problems
    # (stackrl.tasks.posing.request_text), whose reply's first item is the question.
    topic: Optional[str] = None
    topic_examples: int = 4
    # Whether the question is the first item of the numbered list the reply continues (a pose request), or the whole
    # reply (a free topic prompt).
    numbered: bool = True
    problem_column: str = "question"  # the dataset column a problem's text is in; posed questions get it
    proposer_share: float = 0.25  # the share of a batch's problems that are the topic prompt (once questions exist)
    solver_samples: int = 4  # the solver's answers to each posed question
    solver_sampling: Dict[str, Any] = field(default_factory=dict)  # ctx.generate overrides; {}: the run's sampling
    unanswered_votes: bool = True  # an unanswered sub-rollout is one more answer, as the authors count them
    train_on_dataset: bool = False  # the dataset's own problems are drawn too (the authors have none)

    def __post_init__(self):
        super().__post_init__()
        key = self.section
        if self.solver_samples < 2:
            raise ConfigError(f"{key}.solver_samples must be at least 2 for a majority to mean anything, not "
                              f"{self.solver_samples}")
        if not 0.0 < self.proposer_share < 1.0:
            raise ConfigError(f"{key}.proposer_share must lie strictly between 0 and 1, not {self.proposer_share}")
        if self.topic is None and self.topic_examples < 1:
            raise ConfigError(f"{key}.topic_examples must be at least 1 without a topic, not {self.topic_examples}")
        if self.topic is not None and not self.topic.strip():
            raise ConfigError(f"{key}.topic is empty: give the proposer's prompt, or null for a pose request")


class SelfPlayPlugin(Plugin):
    """The base of a proposer-solver plugin whose ``Config`` is a :class:`SelfPlaySettings`: its
    :class:`SelfPlayPool` (``self.selfplay``), the topic row added at ``train_begin`` and the solver's prompt format
    (``self.prompts``); the plugin adds its ``reward`` and ``post_step``."""

    def __init__(self, config=None):
        super().__init__(config)
        config = self.config
        self.selfplay = SelfPlayPool(config.section, config.problem_column, config.proposer_share,
                                     config.train_on_dataset)
        self.prompts: Optional[QuestionPrompts] = None  # the solver's prompt format, learnt from the pool

    @hookimpl
    def train_begin(self, ctx):
        pool, config = self.pool_of(ctx), self.config
        self.prompts = self.selfplay.begin(pool, topic_prompt(pool, config.topic, config.topic_examples,
                                                              config.problem_column))

    def pool_of(self, ctx):
        if ctx.pool is None:
            raise PluginError(f"{self.config.section} needs the prompt pool, which this run lacks (its training data "
                              "is not a map-style dataset)")
        return ctx.pool

    def rate(self, ctx, rows: list[int], read) -> list[Posed]:
        """:func:`rate` with the plugin's settings."""
        config = self.config
        if rows and self.prompts is None:
            raise PluginError(f"{config.section}: a topic row was drawn before train_begin learnt the run's prompt "
                              "format")
        return rate(ctx, rows, self.prompts, config.solver_samples, read, numbered=config.numbered,
                    math_verify=config.math_verify, unanswered_votes=config.unanswered_votes,
                    **config.solver_sampling)
