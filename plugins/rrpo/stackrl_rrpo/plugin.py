"""RRPO: a share of each batch's groups continue a failed attempt of their question from a reset point.

For each reset group the policy first attempts its question (``attempts`` samples); the first failed attempt is
cut into steps, a chooser picks the reset step, and the group's ``group_size`` rows are continuations sampled
from the question followed by the steps before it. They are trained on that prompt, so the gradient falls on the
suffix alone, and TRL's per-group normalisation compares continuations of one shared prefix. The suffix ends in
the final answer, so the built-in outcome reward scores it (the role ``reset`` is a solution role).
"""

from __future__ import annotations

import random

import torch

from stackrl import Plugin, Samples, hookimpl
from stackrl.blocks.roles import (
    assign_roles,
    first_turns,
    reset_prompt,
    rows_of_groups,
    split_steps,
    text_prompt,
    uniform_reset,
)
from stackrl.rewards import OUTCOME_REWARDS, RESET, ROLE_COLUMN, SOLVE, reference_answers
from stackrl.tasks import judge_prompt, judged_wrong_step
from stackrl_rrpo.config import RrpoConfig
from stackrl_rrpo.resets import first_wrong_line

CHOOSERS = {"random": uniform_reset, "oracle": first_wrong_line}


class Rrpo(Plugin):
    Config = RrpoConfig
    activity = "groups restarted from a reset point of a failed attempt"

    def __init__(self, config=None):
        super().__init__(config)
        share = self.config.reset_share
        self.shares = {RESET: 1.0} if share == 1 else {SOLVE: 1 - share, RESET: share}
        self.is_correct = OUTCOME_REWARDS[self.config.correct_reward]

    def needs_rewards(self):
        return {"correct_reward": self.config.correct_reward}

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures plain solving
            return None
        size = ctx.group_size
        group_roles = assign_roles(len(prompts) // size, self.shares, key="rrpo.reset_share")
        points = self._reset_points(prompts, group_roles, ctx)
        reset_steps, prefixes = [], []  # per group; a group without a reset point solves afresh
        for group in range(len(group_roles)):
            steps, index = points.get(group, ([], -1))
            group_roles[group] = RESET if group in points else SOLVE
            reset_steps.append(index)
            prefixes.append(reset_prompt("", steps, index) if group in points else "")
        rows = [
            text_prompt(prompt, role=RESET) + prefixes[i // size] if prefixes[i // size] else prompt
            for i, prompt in enumerate(prompts)
        ]
        generations = ctx.generate(rows)
        ctx.log("reset_groups", len(points) / len(group_roles))
        ctx.acted(len(points), of=len(group_roles), hint="no reset group's first attempt failed (rrpo.reset_share)")
        return Samples(
            completion_ids=[g.completion_ids for g in generations],
            prompt_ids=[g.prompt_ids for g in generations],  # the question and the prefix: the suffix alone trains
            columns={
                ROLE_COLUMN: rows_of_groups(group_roles, size),
                "reset_step": rows_of_groups(reset_steps, size),
                "reset_prefix": rows_of_groups(prefixes, size),
            },
        )

    def _reset_points(self, prompts, group_roles, ctx) -> dict[int, tuple[list[str], int]]:
        """For each reset group that yields one: the steps of its first failed attempt and the reset index."""
        size = ctx.group_size
        if RESET not in group_roles:
            return {}
        answers = reference_answers(ctx.rollout_columns, self.config.answer_column, plugin=self.name,
                                    purpose="tell failed attempts by")
        attempts = first_turns(prompts, group_roles, {RESET}, ctx, samples=self.config.attempts)
        failed = {}  # group -> the steps of its first failed attempt
        for group, tries in attempts.items():
            if answers[group * size] is None:  # without an answer no attempt is known to fail: it solves afresh
                continue
            text = next((a.text for a in tries if not self.is_correct(a.text, answers[group * size])), None)
            if text is not None:
                failed[group] = split_steps(text)
        if self.config.reset == "self":
            indices = self._judged_steps(prompts, failed, size, ctx)
        else:
            rng = random.Random(f"rrpo-{self.config.seed}-{ctx.step}")  # the same draws on every process
            indices = {group: CHOOSERS[self.config.reset](steps, rng) for group, steps in failed.items()}
        points = {group: (failed[group], index) for group, index in indices.items() if index is not None}
        ctx.log("reset_found", len(points) / len(attempts))
        return points

    @staticmethod
    def _judged_steps(prompts, failed: dict, size: int, ctx) -> dict[int, int | None]:
        """SRPO: the policy judges each failed attempt (greedy, in the built-in task's judge format); the step its
        reply marks wrong is the reset point."""
        groups = list(failed)
        judged = [judge_prompt(text_prompt(prompts[g * size], role=RESET), "".join(failed[g])) for g in groups]
        replies = ctx.generate(judged, do_sample=False)
        return {g: judged_wrong_step(r.text, len(failed[g])) for g, r in zip(groups, replies)}

    @hookimpl
    def post_step(self, ctx):
        """How the reset groups fared: suffix success and the share of reset groups whose rewards differ."""
        rollout = ctx.rollout
        if rollout is None or ROLE_COLUMN not in rollout.columns:
            return
        size = rollout.group_size
        reset = torch.tensor([role == RESET for role in rollout.columns[ROLE_COLUMN]])
        if not reset.any():
            return
        rewards = rollout.rewards[self.config.correct_reward]
        ctx.log("suffix_success", float((rewards[reset] >= 1).float().mean()))
        groups = rewards[reset].view(-1, size)
        ctx.log("reset_groups_with_spread", float((groups.max(1).values > groups.min(1).values).float().mean()))
