"""MR-RLVR as a plugin: stage 1 trains on process tasks built from the solutions, stage 2 on the problems."""

from __future__ import annotations

import random

from stackrl import Plugin, PluginError, hookimpl
from stackrl.truth import TRUTH_COLUMN

from stackrl_mrrlvr.config import MrrlvrConfig
from stackrl_mrrlvr.tasks import (
    FILL,
    fill_agreement,
    maskable_steps,
    masked_solution,
    order_agreement,
    shuffled_solution,
    steps_of,
)

TASK_COLUMN = "mrrlvr_task"  # "fill" or "reorder" on a process row, None on a problem
STEP_COLUMN = "mrrlvr_step"  # the masked step of a fill


class Mrrlvr(Plugin):
    """Stage 1: the prompt pool holds one fill and one reorder task per problem with a solution, rewarded by
    agreement with the original; at ``switch_step`` the pool switches back to the problems and this reward's
    weight drops to 0, leaving the outcome reward alone (stage 2)."""

    Config = MrrlvrConfig
    activity = "completions were fill or reorder tasks it scored (in stage 1)"

    def check_run(self, run):
        run.need_column("mrrlvr.solution_column", self.config.solution_column, "which the process tasks are built from")
        # The pool switches after the step `switch_step`: stage 2's first rollout trains the step after.
        return [run.past_end("mrrlvr.switch_step", self.config.switch_step + 1, "stage 2 (the problems) trains")]

    def reward_weight(self):
        return {0: 1.0, self.config.switch_step: 0.0}

    @hookimpl
    def train_begin(self, ctx):
        pool = self._pool(ctx)
        # A resumed run finds its pool restored, at stage 1 or 2: nothing to build.
        if pool.stage == 0 and ctx.step < self.config.switch_step:
            pool.switch_dataset(self.process_rows({i: pool.row(i) for i in pool.active_rows()}, ctx.step))

    @hookimpl
    def post_step(self, ctx):
        pool = self._pool(ctx)
        if pool.stage == 1 and ctx.step >= self.config.switch_step:
            pool.switch_dataset([i for i in range(len(pool)) if pool.stats(i).stage == 0])

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        tasks = rollout.columns.get(TASK_COLUMN, [None] * len(rollout))
        solutions = rollout.columns.get(self.config.solution_column, [None] * len(rollout))
        steps = rollout.columns.get(STEP_COLUMN, [None] * len(rollout))
        rewards, fills, orders = [], [], []
        for completion, task, solution, step in zip(rollout.completions, tasks, solutions, steps):
            if task is None:  # a problem (stage 2): the outcome reward's to score
                rewards.append(None)
            elif task == FILL:
                rewards.append(fill_agreement(completion, solution, step))
                fills.append(rewards[-1])
            else:
                rewards.append(order_agreement(completion, solution))
                orders.append(rewards[-1])
        # From switch_step on (stage 2) the tasks are gone by design: nothing is left to act on.
        scored = len(fills) + len(orders)
        ctx.acted(scored, of=len(rollout) if ctx.step < self.config.switch_step else scored,
                  hint="no row of the batch was a task of mrrlvr.tasks")
        if fills:
            ctx.log("fill_accuracy", sum(fills) / len(fills))
        if orders:
            ctx.log("order_agreement", sum(orders) / len(orders))
        return rewards

    def process_rows(self, rows: dict[int, dict], step: int) -> list[dict]:
        """The stage-1 rows: for each pool row (id -> columns) with a solution, one row per task it allows, with
        the row's columns but its answer (and hidden answer), the task's prompt, and what the reward needs."""
        config = self.config
        built = []
        for row_id, row in rows.items():
            solution = row.get(config.solution_column)
            if not isinstance(solution, str):
                continue
            kept = {k: v for k, v in row.items() if k not in (config.answer_column, TRUTH_COLUMN)}
            for task in config.tasks:
                rng = random.Random(f"mrrlvr/{config.seed}/{row_id}/{task}")
                if task == FILL:
                    maskable = maskable_steps(solution)
                    if not maskable:
                        continue
                    masked = rng.choice(maskable)
                    shown, template = masked_solution(solution, masked, config.mask), config.fill_template
                else:
                    if len(set(steps_of(solution)[:-1])) < 2:
                        continue
                    masked, shown, template = None, shuffled_solution(solution, rng), config.reorder_template
                prompt = _task_prompt(template, shown, row["prompt"])
                built.append({**kept, "prompt": prompt, TASK_COLUMN: task, STEP_COLUMN: masked})
        if not built:
            raise PluginError(
                f"mrrlvr: no training row at step {step} has a worked solution in column "
                f"'{config.solution_column}' (mrrlvr.solution_column) with a step to mask or two to reorder"
            )
        return built

    @staticmethod
    def _pool(ctx):
        if ctx.pool is None:
            raise PluginError(
                "mrrlvr needs the prompt pool, which this run lacks (its training data is not a map-style dataset)"
            )
        return ctx.pool


def _task_prompt(template: str, solution: str, prompt):
    """The task's prompt in the run's form: text, or chat messages whose last user message carries the task."""
    if isinstance(prompt, str):
        return template.format(solution=solution, prompt=prompt)
    messages = [dict(m) for m in prompt]
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    messages[last]["content"] = template.format(solution=solution, prompt=messages[last]["content"])
    return messages
