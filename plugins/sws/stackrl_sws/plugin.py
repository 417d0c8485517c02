"""SwS: from the record of each problem's pass rates, find the problems the policy keeps failing, share a budget
of new problems among their categories by failure ratio, have a model write problems from each weak category's
failure cases, keep those whose answer the model gives consistently, add them to the prompt pool with that
answer, and retire those whose first group is too easy or too hard.

Paper: SwS: Self-aware Weakness-driven Problem Synthesis in Reinforcement Learning for LLM Reasoning (Liang et al.,
2025, arXiv 2506.08989). Code followed: github.com/MasterVito/SwS @ 84cb58e.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

import torch

import stackrl
from stackrl.blocks.selfinstruct import SelfInstructSettings, SimilarityIndex, rule_rejection
from stackrl.blocks.selfplay import QuestionPrompts, majority, solutions
from stackrl.rewards import extract_answer
from stackrl.tasks.posing import parse_problems, request_text

from stackrl_sws.weakness import budgets, failure_ratios, is_failure

CATEGORY_COLUMN = "category"  # the pool's category column (stackrl.pool)


@dataclass
class SwsConfig:
    """The section `sws:`. Defaults: the authors' values where they have one (README's table)."""

    # A synthesis round after every this many optimizer steps, at most max_rounds rounds. The authors synthesise
    # once, between the identification run and the augmented run.
    every_steps: int = 20
    max_rounds: int = 1
    # A failure case: at least min_records pass rates recorded, none reaching max_pass_rate, slope <= 0.
    max_pass_rate: float = 0.5
    min_records: int = 1
    # New problems asked for per round, shared among categories by failure ratio (each share rounded down).
    problems_per_round: int = 16
    examples: int = 4  # failure cases of the category listed in each pose request
    # The model that writes and answers the new problems (the authors' strong model): `policy`, `reference`, or
    # an aux_models name.
    model: str = "policy"
    # The answer check: the answerer solves each new problem answer_samples times; the most frequent answer is its
    # reference answer if at least min_agreement samples give it (authors: 8 samples, 4 agreeing).
    answer_samples: int = 8
    min_agreement: int = 4
    math_verify: bool = True  # answers compared with math_verify, as the authors' check (false: normalised strings)
    # The difficulty filter: a new problem whose first group's pass rate lies outside [min_pass_rate,
    # max_kept_pass_rate] retires (authors' accuracy bounds of the augmented run: 0.125, 0.875).
    difficulty_filter: bool = True
    min_pass_rate: float = 0.125
    max_kept_pass_rate: float = 0.875
    max_similarity: float = 0.7  # ROUGE-L against the pool above this: the new problem is dropped
    problem_column: str = "question"
    answer_column: str = "answer"
    pose_sampling: Dict[str, Any] = field(
        default_factory=lambda: {"do_sample": True, "temperature": 1.0, "max_new_tokens": 256})
    answer_sampling: Dict[str, Any] = field(
        default_factory=lambda: {"do_sample": True, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 1024})
    seed: int = 0

    def __post_init__(self):
        if self.every_steps < 1:
            raise stackrl.ConfigError(f"sws.every_steps: must be at least 1, not {self.every_steps}")
        if self.max_rounds < 0:
            raise stackrl.ConfigError(f"sws.max_rounds: must be 0 or more, not {self.max_rounds}")
        if not 0.0 < self.max_pass_rate <= 1.0:
            raise stackrl.ConfigError(f"sws.max_pass_rate: must lie in (0, 1], not {self.max_pass_rate}")
        if self.min_records < 1:
            raise stackrl.ConfigError(f"sws.min_records: must be at least 1, not {self.min_records}")
        if self.problems_per_round < 1 or self.examples < 1:
            raise stackrl.ConfigError("sws.problems_per_round: and sws.examples must be at least 1")
        if not 1 <= self.min_agreement <= self.answer_samples:
            raise stackrl.ConfigError(
                f"sws.min_agreement: must lie in 1..answer_samples ({self.answer_samples}), not {self.min_agreement}")
        if not 0.0 <= self.min_pass_rate <= self.max_kept_pass_rate <= 1.0:
            raise stackrl.ConfigError("sws.min_pass_rate: and sws.max_kept_pass_rate must satisfy 0 <= min <= max <= 1")
        if not 0.0 <= self.max_similarity <= 1.0:
            raise stackrl.ConfigError(f"sws.max_similarity: must lie in [0, 1], not {self.max_similarity}")


class Sws(stackrl.Plugin):
    """SwS (Liang et al., 2025, arXiv 2506.08989) in post_step: weakness record, synthesis, answer check, filter."""

    Config = SwsConfig
    activity = "drawn problems were failure cases (never passing, not improving)"

    def __init__(self, config=None):
        super().__init__(config)
        self.records: dict[int, list[float]] = {}  # pool row -> its pass rates, one per group drawn
        self.written: dict[int, str] = {}  # pool row -> category, the rows this plugin added
        self.pending: set[int] = set()  # written rows not drawn yet
        self.rounds = 0
        self.batches_seen = 0
        self.last_round: dict | None = None  # what the last round did (not checkpointed; for logs and tests)
        self._generator = torch.Generator().manual_seed(self.config.seed)

    def check_run(self, run):
        config = self.config
        aux = set(run.aux_models)
        if config.model not in {"policy", "reference", *aux}:
            raise stackrl.ConfigError(
                f"sws.model: {config.model!r} names no model of this run (policy, reference, aux_models: "
                f"{', '.join(sorted(aux)) or 'none'})")
        if config.model in aux and config.answer_samples > 1:
            raise stackrl.ConfigError(
                f"sws.answer_samples: an auxiliary model answers a repeated request once per step (docs/hooks.md), "
                f"so with model: {config.model} the answer check takes 1 sample (and min_agreement 1)")
        return None

    # -- the record --------------------------------------------------------------------------------------------------

    def failure_cases(self) -> list[int]:
        c = self.config
        return [row for row, record in self.records.items() if is_failure(record, c.max_pass_rate, c.min_records)]

    def _record(self, ctx) -> None:
        pool = ctx.pool
        for row in pool.last_batch:
            rate = pool.stats(row).last_pass_rate
            if row in self.pending:
                self.pending.discard(row)
                c = self.config
                if c.difficulty_filter and (rate is None or not c.min_pass_rate <= rate <= c.max_kept_pass_rate):
                    pool.retire([row])
                    ctx.log("dropped_by_difficulty", 1)
            if row not in self.written and rate is not None:
                self.records.setdefault(row, []).append(float(rate))

    @stackrl.hookimpl
    def post_step(self, ctx):
        if ctx.pool is None:
            raise stackrl.PluginError("sws needs the prompt pool, which this run lacks (its training data is not a "
                                      "map-style dataset)")
        if ctx.pool.batches != self.batches_seen:
            self.batches_seen = ctx.pool.batches
            self._record(ctx)
        failures = set(self.failure_cases())
        batch = ctx.pool.last_batch
        ctx.acted(sum(row in failures for row in batch), of=len(batch))
        ctx.log("failure_cases", len(failures))
        if self.rounds < self.config.max_rounds and ctx.step > 0 and ctx.step % self.config.every_steps == 0:
            self.rounds += 1
            self.synthesise(ctx)

    # -- a round -----------------------------------------------------------------------------------------------------

    def synthesise(self, ctx) -> list[int]:
        """One round: weak categories and their budgets, pose requests, the answer check, the new rows."""
        config, pool = self.config, ctx.pool
        categories = {row: pool.stats(row).category for row in self.records}
        ratios = failure_ratios(self.records, categories, config.max_pass_rate, config.min_records)
        shares = budgets(ratios, config.problems_per_round)
        failures: dict[str, list[int]] = {}
        for row in sorted(self.failure_cases()):
            failures.setdefault(categories[row], []).append(row)
        column = config.problem_column
        known = [str(pool.row(i)[column]) for i in pool.active_rows() if pool.row(i).get(column) is not None]
        questions = QuestionPrompts(pool, column)
        asked, prompts = [], []
        for category, count in shares.items():
            for _ in range(count):
                shown = self._pick(failures[category], config.examples)
                text = request_text([str(pool.row(row)[column]) for row in shown])
                prompts.append([{"role": "user", "content": text}] if pool.chat else text)
                asked.append((category, shown))
        replies = ctx.generate(prompts, model=config.model, **config.pose_sampling) if prompts else []
        index, rules = SimilarityIndex(known), SelfInstructSettings(max_similarity=config.max_similarity)
        candidates = []
        for (category, _), reply in zip(asked, replies):
            for problem in parse_problems(reply.text, continued=not pool.chat):
                if rule_rejection(problem, rules) is None and index.closest(problem) <= config.max_similarity:
                    index.add(problem)
                    candidates.append((problem, category))
                    break
        references, answers = self.check_answers(ctx, questions, [problem for problem, _ in candidates])
        rows = [pool.format_row({column: questions.text(problem), config.answer_column: answer,
                                 CATEGORY_COLUMN: category})
                for (problem, category), answer in zip(candidates, references) if answer is not None]
        ids = pool.add_rows(rows) if rows else []
        self.written.update((i, row[CATEGORY_COLUMN]) for i, row in zip(ids, rows))
        self.pending.update(ids)
        self.last_round = {"step": ctx.step, "ratios": ratios, "budgets": shares, "requests": asked,
                           "candidates": candidates, "answers": answers, "references": references, "added": ids}
        ctx.log("weak_categories", len(shares))
        ctx.log("posed", len(candidates))
        ctx.log("added", len(ids))
        return ids

    def check_answers(self, ctx, questions: QuestionPrompts, problems: list[str]):
        """Each problem's reference answer: the majority of ``answer_samples`` of the model's solutions when at
        least ``min_agreement`` of them give it, else ``None`` (the problem is dropped); and the answers read from
        each problem's solutions."""
        config = self.config
        solved = solutions(ctx, [questions(p) for p in problems], config.answer_samples, extract_answer,
                           math_verify=config.math_verify, model=config.model, **config.answer_sampling)
        found = [majority(group, unanswered_votes=False) for _, group in solved]
        references = [m.answer if m.answer is not None and m.votes >= config.min_agreement else None for m in found]
        return references, [[extract_answer(text) for text in texts] for texts, _ in solved]

    def _pick(self, rows: list[int], count: int) -> list[int]:
        order = torch.randperm(len(rows), generator=self._generator)[:count].tolist()
        return [rows[i] for i in order]

    @stackrl.hookimpl
    def state_dict(self):
        return {"records": {int(k): list(v) for k, v in self.records.items()}, "written": dict(self.written),
                "pending": sorted(self.pending), "rounds": self.rounds, "batches_seen": self.batches_seen,
                "generator": self._generator.get_state()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.records = {int(k): list(v) for k, v in state["records"].items()}
        self.written = {int(k): v for k, v in state["written"].items()}
        self.pending = set(state["pending"])
        self.rounds, self.batches_seen = state["rounds"], state["batches_seen"]
        self._generator.set_state(state["generator"])

