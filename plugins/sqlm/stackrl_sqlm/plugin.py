"""SQLM: the policy poses questions from one topic prompt (the proposer) and solves them (the solver), label-free.

A batch holds proposer groups (completions of the topic prompt, each posing one question) and solver groups (a
question posed at an earlier step, drawn from the prompt pool). In the reward stage each posed question is solved
``solver_samples`` times (the block :mod:`stackrl.blocks.selfplay`); the proposer's completion earns 1 when the
solver's answers neither all agree nor share no answer (SQLM's band), and a solver's completion earns 1 when its
answer is its group's majority answer. After the step the posed questions join the pool as the solver's problems.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import torch

from stackrl import ConfigError, hookimpl
from stackrl.answers import extractor_of
from stackrl.blocks.selfplay import SelfPlayPlugin, SelfPlaySettings, band_reward, solver_majorities

PROPOSE, SOLVE = "sqlm/propose", "sqlm/solve"  # the pool categories of the topic row and of posed questions


class Solved(str, Enum):
    """Which posed questions join the pool as the solver's problems."""

    band = "band"  # those whose proposer earned the reward (the others teach GRPO nothing: all agree, or no majority)
    all = "all"  # every posed question, as the authors train the solver on every one


@dataclass
class SQLMConfig(SelfPlaySettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify. Self-play
    # (inherited, stackrl.blocks.selfplay.SelfPlaySettings): topic, topic_examples, numbered, problem_column,
    # proposer_share, solver_samples (the authors' n = 4), solver_sampling, unanswered_votes (the authors' count),
    # train_on_dataset.
    section: ClassVar[str] = "sqlm"
    min_votes: int = 1  # the proposer's reward: min_votes < answers agreeing with the majority < solver_samples
    proposer_every: int = 5  # the proposer's rows train at every this many steps (the authors' update frequency)
    solved: Solved = Solved.band

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.min_votes < self.solver_samples - 1:
            raise ConfigError(f"sqlm.min_votes must lie in 0..solver_samples - 2 ({self.solver_samples - 2}), or no "
                              f"question earns the reward; not {self.min_votes}")
        if self.proposer_every < 1:
            raise ConfigError(f"sqlm.proposer_every must be at least 1, not {self.proposer_every}")


class SQLM(SelfPlayPlugin):
    """Self-Questioning Language Models (Chen et al., 2025, arXiv 2508.03682) on the pool and the reward hook."""

    Config = SQLMConfig
    activity = "completions it scored (a posed question the solver answered, or a solution with an answer)"

    def __init__(self, config=None):
        super().__init__(config)
        # Questions posed at this step, to join the pool after it: filled in the reward stage, emptied by the
        # post_step that follows, so no checkpoint holds any.
        self.pending: list[str] = []

    @hookimpl
    def post_step(self, ctx):
        added = self.selfplay.after_step(self.pool_of(ctx), self.prompts, self.pending)
        ctx.log("added", len(added))
        self.pending = []

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        read = extractor_of(config, "sqlm", config.answer_extractor or rollout.answer_format)
        proposer = self.selfplay.proposer_rows(rollout)
        size = rollout.group_size
        rewards = torch.full((len(rollout),), float("nan"))
        labels = [None] * len(rollout)

        # The solver's rows: 1 for the group's majority answer.
        answers = [None if p else read(text) for p, text in zip(proposer, rollout.completions)]
        votes = solver_majorities(answers, size, proposer, config.math_verify, config.unanswered_votes)
        for g, vote in votes.items():
            rewards[g * size:(g + 1) * size] = torch.tensor([float(a) for a in vote.agrees])
            labels[g * size:(g + 1) * size] = [vote.answer] * size
        ctx.declare_pseudo_labels(labels)
        scored = sum(answers[i] is not None for g in votes for i in range(g * size, (g + 1) * size))

        # The proposer's rows: its question solved solver_samples times, 1 inside the band.
        rows = [i for i, p in enumerate(proposer) if p]
        posed = self.rate(ctx, rows, read)
        for p in posed:
            rewards[p.row] = 0.0 if p.vote is None else band_reward(p.vote.votes, config.solver_samples,
                                                                     config.min_votes)
            scored += p.vote is not None and p.vote.votes > 0
        if ctx.training:
            self.pending.extend(p.question for p in posed if p.vote is not None
                                and (rewards[p.row] == 1.0 or config.solved == Solved.all))
            resting = ctx.step % config.proposer_every != 0
            rollout.exclude_from_loss([p.row for p in posed if resting or p.question is None])
        solved = [p.vote for p in posed if p.vote is not None]
        if rows:
            ctx.log("proposer/posed", len(solved) / len(rows))
            ctx.log("proposer/in_band", sum(rewards[i].item() for i in rows) / len(rows))
        if solved:
            ctx.log("proposer/agreement", sum(v.agreement for v in solved) / len(solved))
        ctx.log("proposer_share", len(rows) / len(rollout))
        ctx.acted(scored, of=len(rollout), hint=None if scored else "sqlm.answer_extractor: no answer was read")
        return [None if value != value else value for value in rewards.tolist()]  # None: not scored
