"""RISE: some groups solve their question, the others verify an on-policy attempt at theirs; one update.

A verify group's prompt is its question with one attempt the policy just made, in the built-in task's judge
format (``stackrl.tasks.judge_prompt``); its ``group_size`` rows are critiques of that attempt, each ending in a
verdict. The plugin scores both kinds of row: solutions by their final answer, critiques by whether the verdict
matches the attempt's real correctness. TRL normalises each group on its own, so solutions and critiques never
share a baseline.
"""

from __future__ import annotations

from stackrl import Plugin, Samples, hookimpl
from stackrl.blocks.roles import assign_roles, judged_attempt_rows, rows_of_groups
from stackrl.rewards import ROLE_COLUMN, SOLVE, VERIFY, reference_answers
from stackrl.tasks import parse_verdict
from stackrl_rise.config import RiseConfig
from stackrl_rise.scores import critique_score, solution_score

ATTEMPT_CORRECT = "attempt_correct"  # column: the verified attempt's real correctness (None on solve rows)


class Rise(Plugin):
    Config = RiseConfig
    activity = "groups judged an on-policy attempt"

    def __init__(self, config=None):
        super().__init__(config)
        self.shares = {SOLVE: 1 - self.config.verify_share, VERIFY: self.config.verify_share}

    def check_run(self, run):
        run.need_plain_text("rise", "verify prompts extend the question as plain text in the built-in task's judge "
                            "format (docs/roles.md)")

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures plain solving
            return None
        size = ctx.group_size
        answers = self._answers(ctx.rollout_columns)
        group_roles = assign_roles(len(prompts) // size, self.shares, key=f"{self.name}.verify_share")
        # A group without an answer has no attempt to tell right from wrong: it solves, and rise leaves it unscored.
        group_roles = [SOLVE if answers[g * size] is None else role for g, role in enumerate(group_roles)]
        attempts, generations = judged_attempt_rows(prompts, group_roles, VERIFY, ctx)
        ctx.acted(len(attempts), of=len(group_roles), hint=f"{self.name}.verify_share is {self.config.verify_share}")
        attempt_correct = [
            solution_score(attempts[g], answers[g * size], self.config) == self.config.correct if g in attempts else None
            for g in range(len(group_roles))
        ]
        return Samples(
            completion_ids=[g.completion_ids for g in generations],
            prompt_ids=[g.prompt_ids for g in generations],
            columns={
                ROLE_COLUMN: rows_of_groups(group_roles, size),
                ATTEMPT_CORRECT: rows_of_groups(attempt_correct, size),
            },
        )

    @hookimpl
    def reward(self, ctx):
        rollout, n = ctx.rollout, len(ctx.rollout)
        roles = rollout.columns.get(ROLE_COLUMN, [SOLVE] * n)  # no roles in evaluation: every row solves
        targets = rollout.columns.get(ATTEMPT_CORRECT, [None] * n)
        scores, agreed, verdicts = [], [], 0
        for text, answer, role, target in zip(rollout.completions, self._answers(rollout.columns), roles, targets):
            if role != VERIFY:
                scores.append(None if answer is None else solution_score(text, answer, self.config))
                continue
            verdict = parse_verdict(text)
            scores.append(critique_score(text, target, self.config))
            agreed.append(verdict == target)
            verdicts += verdict is not None
        if agreed:
            ctx.log("verify_accuracy", sum(agreed) / len(agreed))
            ctx.log("verdict_rate", verdicts / len(agreed))
        return scores

    def _answers(self, columns: dict) -> list:
        return reference_answers(columns, self.config.answer_column, plugin=self.name,
                                 purpose="score solutions and critiques against")
