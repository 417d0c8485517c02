"""Skill-SP's skill controller as a plugin: a skill library (one record per skill in the experience library, its
utility the controller's running judgement), updated after each step from the solver's outcomes on that skill's
problems, and the pool's category weights (each category of problems a skill) drawn from it before the next."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from stackrl import ConfigError, Plugin, PluginError, hookimpl
from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings
from stackrl.pool import CATEGORY_COLUMN
from stackrl.rewards import OutcomeSettings, reference_answers

from stackrl_skillsp.controller import sampling_weights, solve_rates, updated_utility
from stackrl_skillsp.proposer import propose


@dataclass
class SkillSPConfig(OutcomeSettings):
    # Inherited (stackrl.rewards.OutcomeSettings): metric, the built-in reward that tells a solved task
    # (exact_match), and answer_column, the column of the tasks' verified answers.
    section: ClassVar[str] = "skillsp"
    alpha: float = 0.5  # the step of a skill's utility toward the informativeness of its solve rate
    initial_utility: float = 1.0  # a skill added to the library starts here: as informative as a skill can be
    floor: float = 0.05  # added to every utility before normalising: no skill in the library is never drawn
    # The skill library: one record per skill, keyed by the skill's name; past `capacity`, the skill of lowest
    # utility leaves it (and is no longer drawn).
    # The proposer (built-in task only, a model that poses: stackrl/arith-skills): after each step, `propose` tasks,
    # each for a skill drawn by the controller's weights, written by the policy from `examples` problems of that
    # skill; those the task's reader verifies as problems of that skill join the pool under it. 0: no proposer.
    propose: int = 0
    examples: int = 4
    problem_column: str = "question"
    max_new_tokens: int = 64
    experience: ExperienceSettings = field(
        default_factory=lambda: ExperienceSettings(capacity=64, eviction="lowest_utility"))

    def check(self):
        if not 0 < self.alpha <= 1:
            raise ConfigError(f"skillsp.alpha: must lie in (0, 1], not {self.alpha}")
        if not (math.isfinite(self.initial_utility) and 0 <= self.initial_utility <= 1):
            raise ConfigError(f"skillsp.initial_utility: must lie in [0, 1], not {self.initial_utility}")
        if not (math.isfinite(self.floor) and self.floor > 0):
            raise ConfigError(f"skillsp.floor: must be a positive number, not {self.floor}")
        if self.propose < 0:
            raise ConfigError(f"skillsp.propose: must be 0 (no proposer) or more, not {self.propose}")
        if self.examples < 1:
            raise ConfigError(f"skillsp.examples: must be at least 1, not {self.examples}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"skillsp.max_new_tokens: must be at least 1, not {self.max_new_tokens}")


class SkillSP(Plugin):
    """Routes the next problems to the skills whose problems the solver solves at an informative rate."""

    Config = SkillSPConfig
    activity = "completions were attempts at a skill whose utility they updated"

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, "skillsp")
        self.batches_seen = 0  # the pool's batch count at the last update: one update per generation batch
        self.retired: list[str] = []  # skills evicted from a full library: never added again

    def check_run(self, run):
        run.need_column("skillsp", CATEGORY_COLUMN, "whose values name the skill of each problem")
        if self.config.propose:
            run.need_column("skillsp.problem_column", self.config.problem_column, "whose problems show the proposer a skill")

    @property
    def utilities(self) -> dict[str, float]:
        """Each skill in the library and its utility."""
        return {record.key: record.utility for record in self.library}

    def add_skills(self, skills) -> list[str]:
        """Add to the library the skills it lacks, at ``initial_utility``; the names added."""
        added = []
        for skill in skills:
            if skill is not None and skill not in self.library and skill not in self.retired:
                evicted = self.library.add(Experience(prompt_ids=[], completion_ids=[], key=skill, artefact=skill,
                                                      tags=[skill], utility=self.config.initial_utility))
                self.retired.extend(record.key for record in evicted)
                if skill in self.library:
                    added.append(skill)
        return added

    @hookimpl
    def train_begin(self, ctx):
        self._route(ctx)

    @hookimpl
    def post_step(self, ctx):
        # With steps_per_generation > 1 several optimizer steps share one rollout: it is counted once.
        if ctx.pool is None or ctx.pool.batches == self.batches_seen or ctx.rollout is None:
            return
        self.batches_seen = ctx.pool.batches
        rollout = ctx.rollout
        skills = [None if c is None else str(c) for c in rollout.columns.get(CATEGORY_COLUMN, [None] * len(rollout))]
        answers = reference_answers(rollout.columns, self.config.answer_column, plugin="skillsp",
                                    purpose="tell the solved tasks of each skill")
        solved = [a is not None and self.config.is_correct(text, str(a))
                  for text, a in zip(rollout.completions, answers, strict=True)]
        self.add_skills(dict.fromkeys(skills))
        rates = solve_rates(skills, solved)
        for skill, rate in rates.items():
            if skill in self.library:
                self.library.set_utility(skill, updated_utility(self.library.get(skill).utility, rate,
                                                                self.config.alpha))
                ctx.log(f"solve_rate/{skill}", rate)
        counted = sum(s is not None and s in self.library for s in skills)
        ctx.acted(counted, of=len(skills), hint=None if counted else f"no row had a '{CATEGORY_COLUMN}' (a skill)")
        weights = self._route(ctx)
        if self.config.propose:
            config = self.config
            tasks, asked = propose(ctx, weights, config.propose, config.examples, config.problem_column,
                                   config.max_new_tokens)
            ctx.log("proposer/verified", len(tasks) / asked if asked else 0.0)
            self._route(ctx)

    def _route(self, ctx) -> dict:
        if ctx.pool is None:
            raise PluginError("skillsp needs the prompt pool, which this run lacks (its training data is not a "
                              "map-style dataset)")
        self.add_skills(ctx.pool.categories())
        drawable = [c for c in ctx.pool.categories() if c is not None and c in self.library]
        if not drawable:
            raise PluginError(f"skillsp: no training row has a '{CATEGORY_COLUMN}' (a skill) at step {ctx.step}")
        weights = sampling_weights({c: self.library.get(c).utility for c in drawable}, self.config.floor)
        ctx.pool.set_category_weights(weights)
        for skill in drawable:
            ctx.log(f"weight/{skill}", weights[skill])
            ctx.log(f"utility/{skill}", self.library.get(skill).utility)
        ctx.log("skills", len(self.library))
        return weights

    @hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict(), "batches_seen": self.batches_seen,
                "retired": list(self.retired)}

    @hookimpl
    def load_state_dict(self, state):
        self.library = ExperienceLibrary(self.config.experience, "skillsp")
        self.library.load_state_dict(state["library"])
        self.batches_seen = state["batches_seen"]
        self.retired = list(state["retired"])
