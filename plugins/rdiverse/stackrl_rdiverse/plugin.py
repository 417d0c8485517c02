"""R-Diverse: R-Zero's Challenger-Solver self-play with a Memory-Augmented Penalty and Skill-Aware Measurement.

A batch holds challenger groups (completions of one topic prompt, each posing a question) and solver groups
(questions posed at earlier steps, drawn from the prompt pool). In the reward stage each posed question is solved
``solver_samples`` times (the block :mod:`stackrl.blocks.selfplay`); the challenger earns R-Zero's uncertainty
``1 - 2 |p - 1/2|`` of the solver's agreement ``p`` with its majority answer, less the memory penalty: its
similarity, by the skill it exercises, to the questions posed at every earlier step. A question whose agreement
lies in ``[min_agreement, max_agreement]`` joins the pool with its majority answer as the pseudo-label, and the
solver's completions of it earn 1 for reaching that answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from stackrl import ConfigError, hookimpl
from stackrl.answers import extractor_of
from stackrl.blocks.selfplay import SelfPlayPlugin, SelfPlaySettings, labelled_rewards, uncertainty_reward
from stackrl_rdiverse.memory import MemoryBank, Skill, memory_penalty

LABEL_COLUMN = "rdiverse_label"  # a posed question's pseudo-label: the solver's majority answer when it was posed
NO_QUESTION = -1.0  # R-Zero's challenger reward for a reply that poses nothing


@dataclass
class RDiverseConfig(SelfPlaySettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify. Self-play
    # (inherited, stackrl.blocks.selfplay.SelfPlaySettings): topic, topic_examples, numbered, problem_column,
    # proposer_share, solver_sampling, unanswered_votes, train_on_dataset.
    section: ClassVar[str] = "rdiverse"
    solver_samples: int = 10  # R-Zero's m: the solver's answers to each question
    # The solver's questions: agreement within [min_agreement, max_agreement] (R-Zero's 0.3 and 0.8).
    min_agreement: float = 0.3
    max_agreement: float = 0.8
    # The Memory-Augmented Penalty: weight * (max_weight * max similarity + mean_weight * mean similarity) to the
    # questions posed at every earlier step, compared by `skill` (Skill-Aware Measurement: `structure`).
    penalty_weight: float = 1.0
    max_weight: float = 0.5
    mean_weight: float = 0.5
    skill: Skill = Skill.structure

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.min_agreement <= self.max_agreement <= 1.0:
            raise ConfigError(f"rdiverse.min_agreement and rdiverse.max_agreement must satisfy 0 <= min <= max <= 1, "
                              f"not [{self.min_agreement}, {self.max_agreement}]")
        for key in ("penalty_weight", "max_weight", "mean_weight"):
            if getattr(self, key) < 0:
                raise ConfigError(f"rdiverse.{key} must be 0 or more, not {getattr(self, key)}")


class RDiverse(SelfPlayPlugin):
    """R-Diverse (Li et al., 2026, arXiv 2602.13103) on the pool and the reward hook."""

    Config = RDiverseConfig
    activity = "completions it scored (a posed question the solver answered, or a solution to a labelled question)"

    def __init__(self, config=None):
        super().__init__(config)
        self.memory = MemoryBank(self.config.skill)
        self.posed: list[str] = []  # this step's questions: the memory takes them after the step
        self.pending: list[tuple[str, str]] = []  # this step's questions for the solver, with their pseudo-labels

    @hookimpl
    def post_step(self, ctx):
        pool = self.pool_of(ctx)
        questions = [q for q, _ in self.pending]
        labels = [{LABEL_COLUMN: label} for _, label in self.pending]
        ctx.log("added", len(self.selfplay.after_step(pool, self.prompts, questions, labels)))
        self.memory.add(self.posed)  # persistent: later steps are penalised for resembling these
        ctx.log("memory", len(self.memory.questions))
        self.posed, self.pending = [], []

    def challenger_reward(self, agreement: float, question: str) -> tuple[float, float]:
        """The challenger's reward for a question the solver agreed on at ``agreement``, and its memory penalty."""
        config = self.config
        penalty = config.penalty_weight * memory_penalty(self.memory.similarities(question), config.max_weight,
                                                         config.mean_weight)
        return uncertainty_reward(agreement) - penalty, penalty

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        read = extractor_of(config, "rdiverse", config.answer_extractor or rollout.answer_format)
        proposer = self.selfplay.proposer_rows(rollout)
        rewards = torch.full((len(rollout),), float("nan"))

        # The solver's rows: 1 for reaching the question's pseudo-label (rows without one are not scored).
        scored = labelled_rewards(ctx, rewards, proposer, LABEL_COLUMN, read, config.math_verify)

        # The challenger's rows: uncertainty less the memory penalty; -1 for posing nothing.
        rows = [i for i, p in enumerate(proposer) if p]
        posed = self.rate(ctx, rows, read)
        penalties = []
        for p in posed:
            if p.vote is None:
                rewards[p.row] = NO_QUESTION
                continue
            rewards[p.row], penalty = self.challenger_reward(p.vote.agreement, p.question)
            penalties.append(penalty)
            scored += 1
        if ctx.training:
            self.posed.extend(p.question for p in posed if p.vote is not None)
            self.pending.extend((p.question, p.vote.answer) for p in posed if p.vote is not None
                                and p.vote.answer is not None
                                and config.min_agreement <= p.vote.agreement <= config.max_agreement)
        if penalties:
            ctx.log("challenger/penalty", sum(penalties) / len(penalties))
        if rows:
            ctx.log("challenger/posed", len(penalties) / len(rows))
        ctx.acted(scored, of=len(rollout), hint=None if scored else "rdiverse.answer_extractor: no answer was read")
        return [None if value != value else value for value in rewards.tolist()]  # None: not scored

    @hookimpl
    def state_dict(self):
        return {"memory": self.memory.state_dict()}

    @hookimpl
    def load_state_dict(self, state):
        self.memory.load_state_dict(state["memory"])
