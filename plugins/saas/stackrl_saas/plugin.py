"""SAAS: the search boundary of the current policy (the questions it answers right without the tool), found by
contrasting tool-free answers with the tool-enabled episodes of the ``env`` plugin, turned into trajectory-level
penalties on unnecessary and repeated tool calls, switched on after an outcome-only first stage
(:mod:`stackrl_saas.boundary` holds the rule).

Paper: "SAAS: Self-Aware Reinforcement Learning for Over-Search Mitigation in Agentic Search", Tang et al.,
arXiv:2605.29796. Code followed: github.com/XMUDeepLIT/SAAS at d27fa54 (search/generate_with_search.py,
search/utils.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import ClassVar, Optional

import stackrl
from stackrl.blocks.env import MOVES_COLUMN, SEAT_COLUMN
from stackrl.rewards import OutcomeSettings, reference_answers
from stackrl_saas.boundary import LABELS, NO_SEARCH, UNDETERMINED, boundary_label, group_penalties, repeats_a_call


@dataclass
class SaasConfig(OutcomeSettings):
    """The ``saas:`` section. ``metric`` and ``answer_column`` (from OutcomeSettings) tell a right answer, of the
    tool-free answers and of the episodes alike."""

    section: ClassVar[str] = "saas"
    # Tool-free answers sampled per question, the policy on the plain question with no tool to answer its calls
    # (the authors: 4 of each question's 8 rollouts, search disabled).
    tool_free_samples: int = 4
    # A question is inside the boundary (no call needed) when at least this many tool-free answers are right
    # (the authors: 2).
    min_correct: int = 2
    # Penalty per call beyond the question's sufficient count, on a right episode (the authors' beta: 0.05).
    beta: float = 0.05
    # Penalty on an episode that repeats one of its own calls, once (the authors' query repetition penalty: 0.1).
    repeat_penalty: float = 0.1
    # Stage II, the boundary-aware penalties, starts with the rollout of this step (ctx.step); before it the run
    # trains on the outcome reward alone and no tool-free answer is sampled (ours: the authors run stage I as a
    # separate outcome-only training and do not publish its length).
    stage_two_step: int = 10
    # Generation settings of the tool-free answers; None: the run's (trainer.max_completion_length, temperature).
    max_new_tokens: Optional[int] = None
    temperature: Optional[float] = None

    def check(self):
        if self.tool_free_samples < 1:
            raise stackrl.ConfigError(f"saas.tool_free_samples: must be at least 1, not {self.tool_free_samples}")
        if not 1 <= self.min_correct <= self.tool_free_samples:
            raise stackrl.ConfigError(f"saas.min_correct: must lie in [1, tool_free_samples={self.tool_free_samples}]"
                                      f", not {self.min_correct}")
        for key in ("beta", "repeat_penalty"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value >= 0):
                raise stackrl.ConfigError(f"saas.{key}: must be a finite number of 0 or more, not {value}")
        if self.stage_two_step < 0:
            raise stackrl.ConfigError(f"saas.stage_two_step: must be 0 or more, not {self.stage_two_step}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise stackrl.ConfigError(f"saas.max_new_tokens: must be at least 1, not {self.max_new_tokens}")
        if self.temperature is not None and not (math.isfinite(self.temperature) and self.temperature > 0):
            raise stackrl.ConfigError(f"saas.temperature: must be a positive number, not {self.temperature}")


def row_calls(moves: list, seat: int) -> list[str]:
    """The tool calls a row's seat made in its episode (``env_moves``), in order, each its tool, stripped arguments
    and keyword arguments as one JSON text (keys sorted), so that equal calls compare equal."""
    calls = []
    for who, move in moves:
        if who == seat and not isinstance(move, str):
            name, args, kwargs = move
            stripped = [a.strip() if isinstance(a, str) else a for a in args]
            calls.append(json.dumps([name, stripped, kwargs or {}], sort_keys=True, default=str))
    return calls


class Saas(stackrl.Plugin):
    """From stage II on, samples each question's tool-free answers, labels the question by the search boundary and
    adds each episode's penalty (0 or negative) as the reward component ``saas``."""

    Config = SaasConfig
    activity = "episodes were scored against their question's search boundary (stage II, a determined boundary)"

    def check_run(self, run):
        run.need_column("saas.answer_column", self.config.answer_column, "which tells right answers")
        notes = [run.past_end("saas.stage_two_step", self.config.stage_two_step + 1, "the boundary penalties act")]
        if "env" not in run.components:
            notes.append("saas: counts the tool calls of the env plugin's episodes; without env in plugins it "
                         "scores nothing")
        return notes

    def tool_free_correct(self, ctx, prompts: list, answers: list) -> list[int]:
        """Per question, how many of ``tool_free_samples`` answers to the plain prompt are right (one call)."""
        n = self.config.tool_free_samples
        sampling = {k: v for k, v in (("max_new_tokens", self.config.max_new_tokens),
                                      ("temperature", self.config.temperature)) if v is not None}
        texts = [g.text for g in ctx.generate([p for p in prompts for _ in range(n)], **sampling)]
        return [sum(a is not None and self.config.is_correct(t, str(a)) for t in texts[q * n:(q + 1) * n])
                for q, a in enumerate(answers)]

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        size, rows = rollout.group_size, len(rollout)
        if MOVES_COLUMN not in rollout.columns:
            ctx.acted(0, of=rows, hint="saas counts the env plugin's tool calls: put env in plugins")
            return [None] * rows
        if not ctx.training or ctx.step < self.config.stage_two_step:  # evaluation: the outcome reward alone too
            ctx.acted(0, of=rows, hint=f"stage I (outcome reward alone) until saas.stage_two_step "
                                       f"({self.config.stage_two_step})")
            return [0.0] * rows
        answers = reference_answers(rollout.columns, self.config.answer_column, plugin="saas",
                                    purpose="tell right answers")
        correct = [a is not None and self.config.is_correct(t, str(a)) for t, a in zip(rollout.completions, answers)]
        seats = rollout.columns.get(SEAT_COLUMN, [0] * rows)
        calls = [row_calls(m, s) for m, s in zip(rollout.columns[MOVES_COLUMN], seats)]
        counts = [len(c) for c in calls]
        repeated = [repeats_a_call(c) for c in calls]
        starts = range(0, rows, size)
        free = self.tool_free_correct(ctx, [rollout.prompts[g] for g in starts], [answers[g] for g in starts])
        penalties, labels = [], []
        for g, k in zip(starts, free):
            group = slice(g, g + size)
            label = boundary_label(k, correct[group], self.config.min_correct)
            if answers[g] is None:
                label = UNDETERMINED
            labels.append(label)
            penalties += group_penalties(label, counts[group], correct[group], repeated[group],
                                         beta=self.config.beta, repeat_penalty=self.config.repeat_penalty)
        for name in LABELS:
            ctx.log(f"boundary/{name}", labels.count(name) / len(labels))
        n = self.config.tool_free_samples
        ctx.log("tool_free_accuracy", sum(free) / (n * len(free)))
        ctx.log("calls", sum(counts) / rows)
        ctx.log("repeated", sum(repeated) / rows)
        inside = [labels[i // size] == NO_SEARCH for i in range(rows)]
        ctx.log("unnecessary_calls", sum(c for c, ok in zip(counts, inside) if ok) / rows)
        ctx.log("penalised", sum(p < 0 for p in penalties) / rows)
        ctx.acted(sum(labels[i // size] != UNDETERMINED for i in range(rows)), of=rows,
                  hint="no question had a right answer with the tool or saas.min_correct right tool-free answers")
        return penalties
