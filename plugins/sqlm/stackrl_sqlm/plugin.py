"""SQLM: the policy poses questions from one topic prompt (the proposer) and solves them (the solver), label-free.

A batch holds proposer groups (completions of the topic prompt, each posing one question) and solver groups (a
question posed at an earlier step, drawn from the prompt pool). In the reward stage each posed question is solved
``solver_samples`` times (the block :mod:`stackrl.blocks.selfplay`); the proposer's completion earns 1 when the
solver's answers neither all agree nor share no answer (SQLM's band), and a solver's completion earns 1 when its
answer is its group's majority answer. After the step the posed questions join the pool as the solver's problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Dict, Optional

import torch

from stackrl import ConfigError, Plugin, PluginError, hookimpl
from stackrl.answers import AnswerSettings, extractor_of, groups_of
from stackrl.blocks.selfplay import QuestionPrompts, band_reward, majority, posed_question, solve
from stackrl.pool import CATEGORY_COLUMN
from stackrl.tasks.posing import request_text

PROPOSE, SOLVE = "sqlm/propose", "sqlm/solve"  # the pool categories of the topic row and of posed questions


class Solved(str, Enum):
    """Which posed questions join the pool as the solver's problems."""

    band = "band"  # those whose proposer earned the reward (the others teach GRPO nothing: all agree, or no majority)
    all = "all"  # every posed question, as the authors train the solver on every one


@dataclass
class SQLMConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify.
    section: ClassVar[str] = "sqlm"
    # The proposer's one prompt. None: a pose request listing `topic_examples` of the dataset's problems
    # (stackrl.tasks.posing.request_text, what stackrl/arith-skills learned), whose reply's first item is the question.
    topic: Optional[str] = None
    topic_examples: int = 4
    # Whether the question is the first item of a numbered list the reply continues (a pose request), or the whole
    # reply (a free topic prompt, as the authors' "Generate a three-digit arithmetic problem ...").
    numbered: bool = True
    problem_column: str = "question"  # the dataset column a problem's text is in; posed questions get it
    proposer_share: float = 0.25  # the share of a batch's problems that are the topic prompt (once questions exist)
    solver_samples: int = 4  # the solver's answers to each posed question (the authors' n = 4)
    solver_sampling: Dict[str, Any] = field(default_factory=dict)  # ctx.generate overrides; {}: the run's sampling
    min_votes: int = 1  # the proposer's reward: min_votes < answers agreeing with the majority < solver_samples
    proposer_every: int = 5  # the proposer's rows train at every this many steps (the authors' update frequency)
    solved: Solved = Solved.band
    unanswered_votes: bool = True  # an unanswered sub-rollout is one more answer, as the authors count them
    train_on_dataset: bool = False  # the dataset's own problems are drawn too (the authors have none)

    def __post_init__(self):
        super().__post_init__()
        if self.solver_samples < 2:
            raise ConfigError(f"sqlm.solver_samples must be at least 2 for a majority to mean anything, not "
                              f"{self.solver_samples}")
        if not 0 <= self.min_votes < self.solver_samples - 1:
            raise ConfigError(f"sqlm.min_votes must lie in 0..solver_samples - 2 ({self.solver_samples - 2}), or no "
                              f"question earns the reward; not {self.min_votes}")
        if not 0.0 < self.proposer_share < 1.0:
            raise ConfigError(f"sqlm.proposer_share must lie strictly between 0 and 1, not {self.proposer_share}")
        if self.proposer_every < 1:
            raise ConfigError(f"sqlm.proposer_every must be at least 1, not {self.proposer_every}")
        if self.topic is None and self.topic_examples < 1:
            raise ConfigError(f"sqlm.topic_examples must be at least 1 without a topic, not {self.topic_examples}")
        if self.topic is not None and not self.topic.strip():
            raise ConfigError("sqlm.topic is empty: give the proposer's prompt, or null for a pose request")


class SQLM(Plugin):
    """Self-Questioning Language Models (Chen et al., 2025, arXiv 2508.03682) on the pool and the reward hook."""

    Config = SQLMConfig
    activity = "completions it scored (a posed question the solver answered, or a solution with an answer)"

    def __init__(self, config=None):
        super().__init__(config)
        self.prompts: Optional[QuestionPrompts] = None  # the solver's prompt format, learnt from the pool
        # Questions posed at this step, to join the pool after it: filled in the reward stage, emptied by the
        # post_step that follows, so no checkpoint holds any.
        self.pending: list[str] = []

    # -- the pool: the topic row, the posed questions ------------------------------------------------------------

    @hookimpl
    def train_begin(self, ctx):
        pool = self._pool(ctx)
        self.prompts = QuestionPrompts(pool, self.config.problem_column)
        if not self._rows(pool, PROPOSE, active=False):  # a resumed run finds its topic row restored
            pool.add_rows([{"prompt": self._topic_prompt(pool), CATEGORY_COLUMN: PROPOSE}])
        self._weigh(pool)

    @hookimpl
    def post_step(self, ctx):
        pool = self._pool(ctx)
        if self.prompts is None:
            self.prompts = QuestionPrompts(pool, self.config.problem_column)
        # A posed question is solved once: drawn, it retires (the authors' solver trains on each question once).
        pool.retire([row for row in pool.last_batch if pool.row(row).get(CATEGORY_COLUMN) == SOLVE
                     and not pool.stats(row).retired])
        known = {pool.row(row)[self.config.problem_column] for row in self._rows(pool, SOLVE)}
        fresh = list(dict.fromkeys(q for q in map(self.prompts.text, self.pending) if q not in known))
        if fresh:
            pool.add_rows([pool.format_row({self.config.problem_column: q, CATEGORY_COLUMN: SOLVE}) for q in fresh])
        ctx.log("added", len(fresh))
        self.pending = []
        self._weigh(pool)

    def _weigh(self, pool) -> None:
        """The topic row at ``proposer_share`` of the problems, the posed questions at the rest; the dataset's rows
        only with ``train_on_dataset`` (then the categories are left alone). Nothing while the topic row is
        retired (another plugin switched the pool's data set)."""
        if self.config.train_on_dataset or not self._rows(pool, PROPOSE):
            return
        share = self.config.proposer_share
        weights = {PROPOSE: share, SOLVE: 1.0 - share} if self._rows(pool, SOLVE) else {PROPOSE: 1.0}
        if weights != pool.category_weights:
            pool.set_category_weights(weights)

    @staticmethod
    def _rows(pool, category: str, active: bool = True) -> list[int]:
        rows = pool.active_rows() if active else range(len(pool))
        return [row for row in rows if pool.stats(row).category == category]

    def _topic_prompt(self, pool):
        config = self.config
        if config.topic is not None:
            text = config.topic
        else:
            column = config.problem_column
            problems = [pool.row(i).get(column) for i in pool.active_rows()][: config.topic_examples]
            problems = [p for p in problems if isinstance(p, str)]
            if not problems:
                raise PluginError(f"sqlm.problem_column: no row of the pool has a '{column}' to show in the topic "
                                  "prompt; give sqlm.topic or the column of the dataset's problems")
            text = request_text(problems)
        return [{"role": "user", "content": text}] if pool.chat else text

    @staticmethod
    def _pool(ctx):
        if ctx.pool is None:
            raise PluginError("sqlm needs the prompt pool, which this run lacks (its training data is not a "
                              "map-style dataset)")
        return ctx.pool

    # -- the rewards ---------------------------------------------------------------------------------------------

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        read = extractor_of(config, "sqlm", config.answer_extractor or rollout.answer_format)
        categories = rollout.columns.get(CATEGORY_COLUMN, [None] * len(rollout))
        proposer = [c == PROPOSE for c in categories]
        rewards = torch.full((len(rollout),), float("nan"))
        scored = 0

        # The solver's rows: 1 for the group's majority answer.
        answers = [None if p else read(text) for p, text in zip(proposer, rollout.completions)]
        labels = [None] * len(rollout)
        for g, group in enumerate(groups_of(answers, rollout.group_size, config.math_verify)):
            rows = range(g * rollout.group_size, (g + 1) * rollout.group_size)
            if proposer[rows.start]:
                continue
            vote = majority(group, config.unanswered_votes)
            rewards[rows.start:rows.stop] = torch.tensor([float(a) for a in vote.agrees])
            labels[rows.start:rows.stop] = [vote.answer] * rollout.group_size
            scored += group.answered
        ctx.declare_pseudo_labels(labels)

        # The proposer's rows: its question solved solver_samples times, 1 inside the band.
        rows = [i for i, p in enumerate(proposer) if p]
        questions = {i: posed_question(rollout.completions[i], config.numbered) for i in rows}
        asked = [i for i in rows if questions[i] is not None]
        if asked and self.prompts is None:
            raise PluginError("sqlm: a topic row was drawn before train_begin learnt the run's prompt format")
        solved = solve(ctx, [self.prompts(questions[i]) for i in asked], config.solver_samples, read,
                       math_verify=config.math_verify, **config.solver_sampling)
        in_band = []
        for i, group in zip(asked, solved):
            vote = majority(group, config.unanswered_votes)
            rewards[i] = band_reward(vote.votes, config.solver_samples, config.min_votes)
            scored += vote.votes > 0
            if rewards[i] == 1.0 or config.solved == Solved.all:
                in_band.append(questions[i])
        for i in rows:
            if questions[i] is None:
                rewards[i] = 0.0
        if ctx.training:
            self.pending.extend(in_band)
            resting = ctx.step % config.proposer_every != 0
            rollout.exclude_from_loss([i for i in rows if resting or questions[i] is None])
        if rows:
            ctx.log("proposer/posed", len(asked) / len(rows))
            ctx.log("proposer/in_band", sum(rewards[i].item() for i in rows) / len(rows))
        if solved:
            agreement = [majority(g, config.unanswered_votes).agreement for g in solved]
            ctx.log("proposer/agreement", sum(agreement) / len(agreement))
        ctx.log("proposer_share", len(rows) / len(rollout))
        ctx.acted(scored, of=len(rollout), hint=None if scored else "sqlm.answer_extractor: no answer was read")
        return rewards
