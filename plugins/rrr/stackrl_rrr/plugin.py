"""Reflect, Retry, Reward: only failed first attempts teach, and only through the reflection written on them.

Every group first samples ``attempts`` answers to its question with ``ctx.generate``. A group with a failed one
reflects on it: its rows are reflections sampled from ``reflect_template`` (the question and the failed attempt),
and each reflection gets one retry, sampled from ``retry_template`` with the reflection in it. A reflection is
rewarded 1 when its retry is right and 0 when not; the retry itself is never trained. A group whose attempts all
succeed has nothing to reflect on: it is sampled as usual and kept out of the loss.
"""

from __future__ import annotations

from stackrl import Plugin, Samples, hookimpl
from stackrl.blocks.roles import first_turns, rows_of_groups, text_prompt
from stackrl.plugin import training_only
from stackrl.rewards import REFLECT, ROLE_COLUMN, SOLVE, reference_answers
from stackrl_rrr.config import RrrConfig

RETRY_CORRECT = "retry_correct"  # column: whether the retry after this row's reflection is right (None: no retry)
RETRY = "retry"  # column: the retry's text (None: no retry), to read what the reward was given for


class Rrr(Plugin):
    Config = RrrConfig
    activity = "groups reflected on a failed attempt"

    def failed_attempts(self, prompts, answers: list, ctx) -> dict[int, str]:
        """Each group's first failed attempt, of the ``attempts`` sampled per group; a group none of whose attempts
        failed, or without an answer (no attempt is known to fail), has none."""
        size, groups = ctx.group_size, len(prompts) // ctx.group_size
        attempts = first_turns(prompts, [REFLECT] * groups, {REFLECT}, ctx, samples=self.config.attempts)
        failed = {}
        for group, tries in attempts.items():
            if answers[group * size] is None:
                continue
            text = next((a.text for a in tries if not self.config.is_correct(a.text, answers[group * size])), None)
            if text is not None:
                failed[group] = text
        return failed

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        size, groups = ctx.group_size, len(prompts) // ctx.group_size
        answers = reference_answers(ctx.rollout_columns, self.config.answer_column, plugin=self.name,
                                    purpose="tell failed attempts by")
        failed = self.failed_attempts(prompts, answers, ctx)
        group_roles = [REFLECT if g in failed else SOLVE for g in range(groups)]
        rows = [
            self.config.reflect_template.format(prompt=text_prompt(prompt, role=REFLECT), attempt=failed[i // size])
            if i // size in failed
            else prompt
            for i, prompt in enumerate(prompts)
        ]
        reflections = ctx.generate(rows)
        reflecting = [i for i in range(len(prompts)) if i // size in failed]
        retries = ctx.generate(
            [
                self.config.retry_template.format(
                    prompt=prompts[i], attempt=failed[i // size], reflection=reflections[i].text
                )
                for i in reflecting
            ]
        )
        retry_correct, retry_texts = [None] * len(prompts), [None] * len(prompts)
        for i, retry in zip(reflecting, retries):
            retry_correct[i] = self.config.is_correct(retry.text, answers[i])
            retry_texts[i] = retry.text
        ctx.acted(len(failed), of=groups, hint=f"no group failed any of its rrr.attempts {self.config.attempts}")
        ctx.log("failed_groups", len(failed) / groups)
        return Samples(
            completion_ids=[g.completion_ids for g in reflections],
            prompt_ids=[g.prompt_ids for g in reflections],
            columns={ROLE_COLUMN: rows_of_groups(group_roles, size), RETRY_CORRECT: retry_correct, RETRY: retry_texts},
        )

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if RETRY_CORRECT not in rollout.columns:  # evaluation: nothing reflected
            return [None] * len(rollout)
        correct = rollout.columns[RETRY_CORRECT]
        solving = [i for i, value in enumerate(correct) if value is None]
        rollout.exclude_from_loss(solving)  # only reflections on failed attempts are trained
        retried = [value for value in correct if value is not None]
        if retried:
            ctx.log("retry_success", sum(retried) / len(retried))
        return [None if value is None else float(value) for value in correct]
