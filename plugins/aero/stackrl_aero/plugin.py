"""AERO: the policy poses questions (the generator), answers them (the solver) and corrects its own answers (the
refiner), label-free.

A batch holds generator groups (completions of one topic prompt, each posing a question) and solver groups
(questions posed at earlier steps, drawn from the prompt pool, each with its pseudo-label). In the reward stage
each posed question is answered ``solver_samples`` times (the block :mod:`stackrl.blocks.selfplay`) and placed by
its normalised answer entropy (:mod:`stackrl_aero.zone`); the generator earns 1 for a question in the ZPD. A ZPD
question's two largest answer clusters are corrected independently (:mod:`stackrl_aero.correction`); when the
corrections agree, the question gets their answer as its pseudo-label, and the question, with a retry row for each
wrong cluster's attempt (the refiner's data), joins the pool ``stagger`` steps later. A solver row earns 1 for
reaching its row's pseudo-label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Optional

import torch

from stackrl import ConfigError, hookimpl
from stackrl.answers import GroupAnswers, equivalent, extractor_of
from stackrl.errors import PluginError
from stackrl.blocks.selfplay import (SelfPlayPlugin, SelfPlaySettings, labelled_rewards, posed_question,
                                     solutions)
from stackrl_aero.correction import Verdict, counterfactual_label, first_attempt, refine_text, top_two
from stackrl_aero.zone import Zone, normalised_entropy, zone

LABEL_COLUMN = "aero_label"  # a pool row's pseudo-label: the answer the corrections agreed on


@dataclass
class AEROConfig(SelfPlaySettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify. Self-play
    # (inherited, stackrl.blocks.selfplay.SelfPlaySettings): topic, topic_examples, numbered, problem_column,
    # proposer_share, solver_sampling, unanswered_votes (unused: AERO leaves unanswered rows out), train_on_dataset.
    section: ClassVar[str] = "aero"
    solver_samples: int = 16  # the authors' sampling_n: the solver's answers to each posed question
    # The ZPD: low <= normalised answer entropy <= high (the authors' 0.3 and 0.7).
    low: float = 0.3
    high: float = 0.7
    # Independent Counterfactual Correction of a ZPD question's two largest clusters. False: the majority answer is
    # the label and no correction is sampled (an ablation, not the authors').
    correction: bool = True
    correction_sampling: Dict[str, Any] = field(default_factory=lambda: {"temperature": 0.1})  # the authors' critic
    refiner: bool = True  # a retry row of each wrong cluster's attempt joins the pool with the label (the refiner)
    stagger: int = 1  # steps a labelled question waits before the solver may draw it (the authors: one round)

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ConfigError(f"aero.low and aero.high must satisfy 0 <= low <= high <= 1, not [{self.low}, "
                              f"{self.high}]")
        if self.stagger < 0:
            raise ConfigError(f"aero.stagger must be 0 or more, not {self.stagger}")


@dataclass(frozen=True)
class Rating:
    """A posed question as the reward stage rated it: its solver answers, normalised entropy and zone, the
    corrections' answers (empty where none was sampled) and the verdict (``None``: no label)."""

    row: int
    question: str
    group: GroupAnswers
    entropy: float
    zone: Zone
    corrected: tuple = ()
    verdict: Optional[Verdict] = None
    attempts: tuple = ()  # the attempts of the two clusters corrected


class AERO(SelfPlayPlugin):
    """AERO (arXiv 2602.03084) on the pool and the reward hook."""

    Config = AEROConfig
    activity = "completions it scored (a posed question the solver answered, or a solution to a labelled question)"

    def __init__(self, config=None):
        super().__init__(config)
        self.pending: list[dict] = []  # this step's labelled questions: question, label, wrong attempts
        self.waiting: list[list[dict]] = []  # earlier steps' labelled questions, oldest first, until their turn
        self.rated: list[Rating] = []  # the last reward stage's ratings (read by the tests and the benchmark)

    # -- the pool: labelled questions join it stagger steps after they were posed --------------------------------

    @hookimpl
    def post_step(self, ctx):
        config = self.config
        self.waiting.append(self.pending)
        self.pending = []
        released = []
        while len(self.waiting) > config.stagger:
            released.extend(self.waiting.pop(0))
        questions, columns = [], []
        for item in released:
            questions.append(item["question"])
            columns.append({LABEL_COLUMN: item["label"]})
            for attempt in item["wrong"] if config.refiner else ():
                questions.append(refine_text(self.prompts, item["question"], attempt))
                columns.append({LABEL_COLUMN: item["label"]})
        ctx.log("added", len(self.selfplay.after_step(self.pool_of(ctx), self.prompts, questions, columns)))
        ctx.log("waiting", sum(len(batch) for batch in self.waiting))

    @hookimpl
    def state_dict(self):
        return {"waiting": [list(batch) for batch in self.waiting]}

    @hookimpl
    def load_state_dict(self, state):
        self.waiting = [list(batch) for batch in state["waiting"]]

    # -- the reward stage -----------------------------------------------------------------------------------------

    def rate_questions(self, ctx, rows: list[int], read) -> list[Rating]:
        """The generator's rows: each question answered ``solver_samples`` times, placed by its answer entropy, and
        a ZPD question's two largest clusters corrected (one ``ctx.generate`` call for all corrections)."""
        config, rollout = self.config, ctx.rollout
        questions = {i: posed_question(rollout.completions[i], config.numbered) for i in rows}
        asked = [i for i in rows if questions[i] is not None]
        solved = solutions(ctx, [self.prompts(questions[i]) for i in asked], config.solver_samples, read,
                           math_verify=config.math_verify, **config.solver_sampling)
        ratings = []
        for i, (texts, group) in zip(asked, solved):
            place = zone(group, config.low, config.high)
            pair = top_two(group) if place == Zone.zpd else []
            attempts = tuple(first_attempt(group, texts, k) for k in pair) if len(pair) == 2 else ()
            ratings.append(Rating(i, questions[i], group, normalised_entropy(group), place, attempts=attempts))
        todo = [r for r in ratings if r.attempts]
        if not config.correction:
            return [self._by_majority(r) for r in ratings]
        fixes = ctx.generate([self.prompts(refine_text(self.prompts, r.question, a)) for r in todo for a in r.attempts],
                             **config.correction_sampling) if todo else []
        corrected = iter([read(g.text) for g in fixes])
        done = {}
        for r in todo:
            answers = (next(corrected), next(corrected))
            clusters = [r.group.distinct[k] for k in top_two(r.group)]
            verdict = counterfactual_label(clusters, list(answers), config.math_verify)
            done[r.row] = Rating(r.row, r.question, r.group, r.entropy, r.zone, answers, verdict, r.attempts)
        return [done.get(r.row, r) for r in ratings]

    def _by_majority(self, r: Rating) -> Rating:
        if not r.attempts:
            return r
        label = r.group.majority_answer
        clusters = [r.group.distinct[k] for k in top_two(r.group)]
        verdict = Verdict(label, tuple(not equivalent(c, label, self.config.math_verify) for c in clusters))
        return Rating(r.row, r.question, r.group, r.entropy, r.zone, (), verdict, r.attempts)

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        read = extractor_of(config, "aero", config.answer_extractor or rollout.answer_format)
        generator = self.selfplay.proposer_rows(rollout)
        rewards = torch.full((len(rollout),), float("nan"))

        # The solver's rows: 1 for reaching the row's pseudo-label (rows without one are not scored).
        scored = labelled_rewards(ctx, rewards, generator, LABEL_COLUMN, read, config.math_verify)

        # The generator's rows: 1 for a question in the ZPD; a reply that poses nothing is left out of the loss.
        rows = [i for i, g in enumerate(generator) if g]
        if rows and self.prompts is None:
            raise PluginError("aero: a topic row was drawn before train_begin learnt the run's prompt format")
        self.rated = self.rate_questions(ctx, rows, read) if rows else []
        for i in rows:
            rewards[i] = 0.0
        for r in self.rated:
            rewards[r.row] = float(r.zone == Zone.zpd)
            scored += 1
        unposed = sorted(set(rows) - {r.row for r in self.rated})
        if ctx.training:
            rollout.exclude_from_loss(unposed)
            self.pending.extend({"question": r.question, "label": r.verdict.label,
                                 "wrong": [a for a, w in zip(r.attempts, r.verdict.wrong) if w]}
                                for r in self.rated if r.verdict is not None)
        if self.rated:
            n = len(self.rated)
            for place in Zone:
                ctx.log(f"generator/{place.value}", sum(r.zone == place for r in self.rated) / n)
            ctx.log("generator/entropy", sum(r.entropy for r in self.rated) / n)
            corrected = [r for r in self.rated if r.attempts]
            if corrected:
                ctx.log("converged", sum(r.verdict is not None for r in corrected) / len(corrected))
        ctx.acted(scored, of=len(rollout), hint=None if scored else "aero.answer_extractor: no answer was read")
        return [None if value != value else value for value in rewards.tolist()]  # None: not scored
