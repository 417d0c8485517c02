"""CoCoS: multi-turn self-correction of programs, rewarded over the whole trajectory.

Each training row is ``turns`` programs in one completion: the first after the prompt, each later one after the
injected ``retry_instruction`` (masked out of the loss), every turn sampled from the exact tokens before it
(``stackrl.blocks.turns``). Each program runs in the sandbox (``stackrl.blocks.sandbox.run_tests``) against the
problem's tests, and scores the share it passes (``fine_grained``; else 1 for all, 0 if not). The row's one reward
is the accumulated reward of its turn scores (:func:`stackrl_cocos.rewards.accumulated`), and GRPO's advantage of
it trains every program the row wrote. Held-out evaluation is a plain first program, scored alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.blocks.sandbox import Sandbox, check_isolation
from stackrl.blocks.turns import (
    ANSWER, SEGMENTS_COLUMN, check_instruction, first_turn, generate_turn, packed_samples, transitions,
)
from stackrl.plugin import training_only
from stackrl.blocks.sandbox import program_of
from stackrl.tasks.programs import CODE_MARKER
from stackrl.tasks import RETRY_INSTRUCTION
from stackrl_cocos.rewards import accumulated, arithmetic_tests, turn_score


@dataclass
class CocosConfig:
    turns: int = 2  # programs a row writes (the authors' num_turns)
    gamma: float = 0.5  # the discount of earlier turns' changes in the accumulated reward (the authors')
    retry_instruction: str = f"\n{RETRY_INSTRUCTION}\n{CODE_MARKER}\n"  # injected before each later program (ours:
    # the roles' retry instruction, then the code marker)
    shared_first_turn: bool = True  # a group's rows continue one first program, context only, and train their later
    # turns (the authors'); false: each row writes its own first program, trained with the rest (ours)
    fine_grained: bool = True  # a turn scores the share of tests passed (the authors' pass count); false: all or nothing
    program_end: str = ""  # a marker the program ends before (the authors' "[DONE]"); "": none
    tests_column: str = ""  # a column of each problem's assertion tests; "": the built-in task's tests, one per line
    # of its own program and the printed answer (stackrl_cocos.rewards.arithmetic_tests)
    question_column: str = "question"  # where the built-in task's tests are written from (tests_column "")
    answer_column: str = "answer"  # what a right program prints (tests_column "")
    timeout_s: float = 5.0  # each test run's wall-clock limit
    cpu_s: float = 5.0  # each test run's CPU-time limit

    def __post_init__(self):
        if self.turns < 1:
            raise stackrl.ConfigError(f"cocos.turns: must be at least 1, not {self.turns}")
        if not 0.0 <= self.gamma <= 1.0:
            raise stackrl.ConfigError(f"cocos.gamma: must be in [0, 1], not {self.gamma}")
        check_instruction("cocos", "retry_instruction", self.retry_instruction)
        for key in ("timeout_s", "cpu_s"):
            if not getattr(self, key) > 0:
                raise stackrl.ConfigError(f"cocos.{key}: must be positive, not {getattr(self, key)}")
        if not self.tests_column and not (self.question_column and self.answer_column):
            raise stackrl.ConfigError("cocos.answer_column: must name a column (or give cocos.tests_column)")


class Cocos(stackrl.Plugin):
    """Rewards a row of several programs by the accumulated change of its programs' test pass shares."""

    Config = CocosConfig
    activity = "completions were programs judged by their tests at every turn"

    def __init__(self, config=None):
        super().__init__(config)
        self.last: dict = {}  # the last reward stage's turn scores and rewards, to inspect

    def check_run(self, run):
        check_isolation(run.sandbox)
        config = self.config
        if not config.tests_column and run.source != "arithmetic":
            raise stackrl.ConfigError(f"cocos.tests_column: needed with data.source {run.source!r} (the plugin writes "
                                      "tests only for the built-in arithmetic task's questions)")
        if config.tests_column:
            run.need_column("cocos.tests_column", config.tests_column, "whose assertions test the programs")
        else:
            run.need_column("cocos.question_column", config.question_column, "from which the tests are written")
            run.need_column("cocos.answer_column", config.answer_column, "the answer the last test checks")

    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        config = self.config
        retry = ctx.tokenizer(config.retry_instruction, add_special_tokens=False)["input_ids"]
        shared = config.shared_first_turn and config.turns > 1
        size = ctx.group_size if shared else 1
        rows = [row.copy() for row in first_turn(prompts[::size], ANSWER, ctx) for _ in range(size)]
        if shared:  # the group's one first program is context: its later turns are what the rows differ by
            for row in rows:
                first = row.segments[0]
                row.loss_mask[first.start:first.end] = [0] * (first.end - first.start)
        for _ in range(config.turns - 1):
            for row in rows:
                row.inject(retry)
            generate_turn(rows, ANSWER, ctx)
        return packed_samples(rows)

    def program_in(self, text: str) -> str:
        """A turn's program: its text up to ``program_end``, then its last fenced block if it has one."""
        end = self.config.program_end
        return program_of(text.split(end, 1)[0] if end else text).strip()

    def tests_of(self, columns: dict, row: int) -> list | None:
        """The row's tests, or ``None`` when it has none (no tests, no answer)."""
        config = self.config
        if config.tests_column:
            tests = columns.get(config.tests_column, [None] * (row + 1))[row]
            return list(tests) if tests else None
        questions, answers = columns.get(config.question_column), columns.get(config.answer_column)
        if questions is None or answers is None or answers[row] in (None, ""):
            return None
        try:
            return arithmetic_tests(questions[row], answers[row])
        except ValueError:  # a row of another task in the pool (a stacked plugin's): no tests, not scored
            return None

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout, config = ctx.rollout, self.config
        segments = rollout.columns.get(SEGMENTS_COLUMN)
        sandbox = Sandbox.of(ctx)
        limits = {"timeout_s": config.timeout_s, "cpu_s": config.cpu_s}
        known: dict = {}  # (program, tests) -> score: a program repeated in a step runs once

        def score(program: str, tests: list) -> float:
            key = (program, tuple(tests))
            if key not in known:
                known[key] = turn_score(sandbox, program, tests, fine_grained=config.fine_grained, **limits)
            return known[key]

        rewards: list = [None] * len(rollout)
        turn_scores: list = [None] * len(rollout)
        for row in range(len(rollout)):
            tests = self.tests_of(rollout.columns, row)
            if tests is None:
                continue
            programs = ([s.text for s in segments[row] if s.kind == ANSWER] if segments is not None
                        else [rollout.completions[row]])
            turn_scores[row] = [score(self.program_in(text), tests) for text in programs]
            rewards[row] = accumulated(turn_scores[row], config.gamma)
        scored = [s for s in turn_scores if s]
        self._log(ctx, scored, [r for r in rewards if r is not None])
        ctx.acted(len(scored), of=len(rollout),
                  hint=f"no row had tests: cocos.answer_column {config.answer_column!r} or cocos.tests_column "
                       f"{config.tests_column!r} names no filled column")
        self.last = {"turn_scores": turn_scores, "rewards": rewards}
        return rewards

    def _log(self, ctx, scored: list, rewards: list) -> None:
        """Each turn's mean score and pass share, and what the last program did to the first (the fix rate)."""
        if not scored:
            return
        for t in range(max(len(s) for s in scored)):
            at = [s[t] for s in scored if len(s) > t]
            ctx.log(f"turn{t + 1}_score", sum(at) / len(at))
            ctx.log(f"turn{t + 1}_pass", sum(x == 1.0 for x in at) / len(at))
        several = [s for s in scored if len(s) > 1]
        if several:
            first, last = [s[0] == 1.0 for s in several], [s[-1] == 1.0 for s in several]
            for key, value in transitions(first, last).items():
                ctx.log(key, value)
            wrong = sum(not f for f in first)
            ctx.log("fix_rate", sum(not f and l for f, l in zip(first, last)) / wrong if wrong else 0.0)
        ctx.log("accumulated_reward", sum(rewards) / len(rewards))
