"""SEIF: one policy plays the Instructor, which poses instructions, and the Follower, which follows them, trained in
turn.

A turn trains the Instructor for ``instructor_steps`` steps: every problem of the batch is the topic row (a pose
request), each completion poses one instruction; the Filter refuses the malformed ones (reward 0, the Follower never
sees them), the evaluator (the policy as the turn began, the authors' previous Follower) answers each of the others
``follower_samples`` times, the Judger checks each answer with the task's verifier, and the Instructor earns the
share that fail. The instructions the Filter passed join the pool with the verifier's answer, and the turn then
trains the Follower on them for ``follower_steps`` steps, each earning 1 for an answer the Judger accepts. Rows of
the role that is not training stay out of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Dict, Optional

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.answers import AnswerSettings, extractor_of
from stackrl.blocks.selfinstruct import SelfInstructSettings
from stackrl.blocks.selfplay import QuestionPrompts, SelfPlayPool, posed_question, topic_prompt
from stackrl.errors import PluginError
from stackrl_seif.roles import Role, Schedule, instructor_reward, judged, normalised, rejection, truth

ANSWER_COLUMN = "seif_answer"  # an instruction's answer, the Judger's check of the Follower's rows
SNAPSHOT = "seif/evaluator"  # the policy as the turn began: the Follower the Instructor is rewarded against


class Evaluator(str, Enum):
    """Whose answers rate the Instructor's instructions."""

    snapshot = "snapshot"  # the policy as the current turn began (the authors' previous Follower, frozen)
    policy = "policy"  # the live policy


@dataclass
class SEIFConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify.
    section: ClassVar[str] = "seif"
    # The Instructor's one prompt. None: a pose request listing `topic_examples` of the dataset's problems
    # (stackrl.tasks.posing.request_text), whose reply's first item is the instruction.
    topic: Optional[str] = None
    topic_examples: int = 4
    numbered: bool = True  # the instruction is the first item of the numbered list the reply continues
    problem_column: str = "question"  # the dataset column a problem's text is in; instructions get it
    # The alternation: each turn trains the Instructor, then the Follower (the first turn's Follower stage
    # `first_follower_steps` long; None: follower_steps).
    instructor_steps: int = 10
    follower_steps: int = 10
    first_follower_steps: Optional[int] = None
    follower_samples: int = 4  # the evaluator's answers to each instruction (the authors: one, judged per constraint)
    follower_sampling: Dict[str, Any] = field(default_factory=dict)  # ctx.generate overrides; {}: the run's sampling
    evaluator: Evaluator = Evaluator.snapshot

    def __post_init__(self):
        super().__post_init__()
        for key in ("instructor_steps", "follower_steps", "follower_samples"):
            if getattr(self, key) < 1:
                raise ConfigError(f"seif.{key} must be at least 1, not {getattr(self, key)}")
        if self.first_follower_steps is not None and self.first_follower_steps < 1:
            raise ConfigError(f"seif.first_follower_steps must be at least 1 (or null: follower_steps), not "
                              f"{self.first_follower_steps}")
        if self.topic is None and self.topic_examples < 1:
            raise ConfigError(f"seif.topic_examples must be at least 1 without a topic, not {self.topic_examples}")
        if self.topic is not None and not self.topic.strip():
            raise ConfigError("seif.topic is empty: give the Instructor's prompt, or null for a pose request")

    @property
    def schedule(self) -> Schedule:
        first = self.follower_steps if self.first_follower_steps is None else self.first_follower_steps
        return Schedule(self.instructor_steps, self.follower_steps, first)


@dataclass(frozen=True)
class Rated:
    """An Instructor row: its instruction, the Filter's rejection (``None``: passed), the evaluator's answers and
    the Judger's verdicts on them (empty when filtered), and the reward."""

    row: int
    question: Optional[str]
    rejected: Optional[str]
    answers: tuple
    verdicts: tuple
    reward: float


class SEIF(Plugin):
    """SEIF (Self-Evolving RL for Instruction Following, arXiv 2605.07465; code Rainier-rq1/SEIF) on the pool, the reward hook and the loss mask."""

    Config = SEIFConfig
    activity = "completions it scored (an instruction the Filter passed and the Follower answered, or a Follower's answer)"

    def __init__(self, config=None):
        super().__init__(config)
        config = self.config
        self.schedule = config.schedule
        # The pool's two categories (the draw is weighed here by role, not by the block's share).
        self.selfplay = SelfPlayPool("seif", config.problem_column, 0.5, train_on_dataset=True)
        self.prompts: Optional[QuestionPrompts] = None  # the Follower's prompt format, learnt from the pool
        self.known: set = set()  # the questions an instruction must not repeat (the pool's, as of the last step)
        self.rules = SelfInstructSettings(problem_column=config.problem_column)  # the Filter's length/word/form rules
        self.rated: list[Rated] = []  # this step's Instructor rows, for the logs and the tests
        self.pending: list[tuple[str, str]] = []  # instructions passed this step, with their answers; emptied after it

    # -- the pool ------------------------------------------------------------------------------------------------

    @hookimpl
    def train_begin(self, ctx):
        pool, config = self._pool(ctx), self.config
        self.prompts = self.selfplay.begin(pool, topic_prompt(pool, config.topic, config.topic_examples,
                                                              config.problem_column))
        self._next(ctx, pool)  # resumed inside a turn: the checkpoint restored the evaluator

    @hookimpl
    def post_step(self, ctx):
        pool = self._pool(ctx)
        ids = self.selfplay.after_step(pool, self.prompts, [q for q, _ in self.pending],
                                       [{ANSWER_COLUMN: answer} for _, answer in self.pending])
        ctx.log("added", len(ids))
        self.pending = []
        self._next(ctx, pool)

    def _next(self, ctx, pool) -> None:
        """Before the step of index ``ctx.step``: the draw weighed for its role, the Filter's known questions read,
        and at a turn's start the evaluator copied from the policy."""
        role = self.schedule.role(ctx.step)
        waiting = self.selfplay.rows(pool, self.selfplay.solve)
        if role == Role.instructor or not waiting:
            weights = {self.selfplay.propose: 1.0}  # (a Follower stage with nothing to follow draws the topic, unused)
        else:
            weights = {self.selfplay.solve: 1.0}
        if weights != pool.category_weights:
            pool.set_category_weights(weights)
        column = self.config.problem_column
        self.known = {normalised(text) for text in (pool.row(i).get(column) for i in pool.active_rows())
                      if isinstance(text, str)}
        if self.config.evaluator == Evaluator.snapshot and self.schedule.turn_starts(ctx.step):
            ctx.update_snapshot(SNAPSHOT, checkpoint=True)
        ctx.log("instructor_stage", float(role == Role.instructor))
        ctx.log("waiting", len(waiting))

    def _pool(self, ctx):
        if ctx.pool is None:
            raise PluginError("seif needs the prompt pool, which this run lacks (its training data is not a "
                              "map-style dataset)")
        return ctx.pool

    # -- the reward stage: the Filter, the evaluator's answers, the Judger -----------------------------------------

    def rate(self, ctx, rows: list[int], read) -> list[Rated]:
        """The Instructor rows ``rows``: each instruction filtered, those passed answered ``follower_samples`` times
        by the evaluator (one ``ctx.generate`` call) and judged; the reward the share of failed answers, 0 when
        filtered."""
        config = self.config
        if rows and self.prompts is None:
            raise PluginError("seif: a topic row was drawn before train_begin learnt the run's prompt format")
        questions = {i: posed_question(ctx.rollout.completions[i], config.numbered) for i in rows}
        rejected = {i: rejection(questions[i], self.known, self.rules) for i in rows}
        passed = [i for i in rows if rejected[i] is None]
        n = config.follower_samples
        model = SNAPSHOT if config.evaluator == Evaluator.snapshot else "policy"
        prompts = [self.prompts(questions[i]) for i in passed for _ in range(n)]
        generations = ctx.generate(prompts, model=model, **config.follower_sampling) if prompts else []
        rated = []
        for i in rows:
            if rejected[i] is not None:
                rated.append(Rated(i, questions[i], rejected[i], (), (), 0.0))
                continue
            k = passed.index(i)
            answers = tuple(read(g.text) for g in generations[k * n:(k + 1) * n])
            expected = truth(questions[i])
            verdicts = tuple(judged(a, expected, config.math_verify) for a in answers)
            rated.append(Rated(i, questions[i], None, answers, verdicts, instructor_reward(list(verdicts))))
        return rated

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        read = extractor_of(config, "seif", config.answer_extractor or rollout.answer_format)
        instructor = self.selfplay.proposer_rows(rollout)
        role = self.schedule.role(ctx.step)
        rewards: list[Optional[float]] = [None] * len(rollout)

        # The Follower's rows: 1 for an answer the Judger accepts (rows without an instruction's answer: unscored).
        expected = rollout.columns.get(ANSWER_COLUMN, [None] * len(rollout))
        follower = [i for i, (p, e) in enumerate(zip(instructor, expected)) if not p and e is not None]
        for i in follower:
            rewards[i] = float(judged(read(rollout.completions[i]), expected[i], config.math_verify))

        # The Instructor's rows: 0 when filtered, else the share of the evaluator's answers that fail.
        rows = [i for i, p in enumerate(instructor) if p]
        self.rated = self.rate(ctx, rows, read)
        for r in self.rated:
            rewards[r.row] = r.reward

        # The alternation: the rows of the role not training stay out of the loss.
        if ctx.training:
            resting = follower if role == Role.instructor else rows
            rollout.exclude_from_loss(resting)
            if role == Role.instructor:
                self.pending.extend((r.question, truth(r.question)) for r in self.rated if r.rejected is None)
        answered = [r for r in self.rated if r.rejected is None]
        if rows:
            ctx.log("instructor/passed", len(answered) / len(rows))
            for reason in ("invalid", "repeat"):
                ctx.log(f"instructor/{reason}", sum(r.rejected == reason for r in self.rated) / len(rows))
        if answered:
            ctx.log("instructor/failure", sum(r.reward for r in answered) / len(answered))
        if follower:
            ctx.log("follower/accuracy", sum(rewards[i] for i in follower) / len(follower))
        scored = len(answered) + len(follower)
        ctx.acted(scored, of=len(rollout), hint=None if scored else
                  "seif.topic_examples: no instruction passed the Filter and no Follower row was drawn")
        return rewards
