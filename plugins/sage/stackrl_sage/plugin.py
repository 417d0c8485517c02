"""The SAGE plugin: hinted rollouts for the groups plain GRPO would learn nothing from."""

from __future__ import annotations

import torch

import stackrl
from stackrl import ConfigError
from stackrl.rewards import OUTCOME_REWARDS

from stackrl_sage.config import SageConfig, check
from stackrl_sage.hints import LEVELS, HintBank, Problem, fill, prompt_key, prompt_text, with_text
from stackrl_sage.tracker import LevelTracker


class Sage(stackrl.Plugin):
    """SAGE (Self-hinting GRPO): hints from the reference solution reshape training rollouts, never evaluation.

    ``mode: sage`` re-rolls unsolved groups under ever stronger hints (``generate_rollout``); ``mode: light``
    hints each prompt at the level a tracker keeps for it (``transform_prompts``, updated in ``post_step``).
    """

    Config = SageConfig
    activity = "groups were rolled out under a hint"

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)
        self.bank = HintBank(self.config)
        self.tracker = LevelTracker(self.config.level_up_at, self.config.level_down_above)
        # mode light: (tracker key, level shown) of each group of the batch awaiting its accuracy
        self._visit: list[tuple[str, int]] | None = None
        self._awaiting_rollout = False  # mode sage: a training batch began and generate_rollout has not run yet

    # -- sample -----------------------------------------------------------------------------------------------------

    @stackrl.hookimpl
    def transform_prompts(self, prompts, ctx):
        if not ctx.training:
            return None
        if self.config.mode == "sage":
            self._awaiting_rollout = True
            return None
        size = ctx.group_size
        keys = [prompt_key(prompts[first]) for first in range(0, len(prompts), size)]
        tracked = [self.tracker.level(key) for key in keys]
        wanted = [g for g, level in enumerate(tracked) if level > 0]
        hints = self.bank.lookup([self._problem(prompts, ctx, g * size) for g in wanted], ctx)
        # A group without a hint at its tracked level goes unhinted, and its visit counts as one at level 0: the
        # authors record the level a prompt was shown at, not the level it was due.
        levels = [0] * len(keys)
        out = list(prompts)
        for g, group_hints in zip(wanted, hints):
            hint = group_hints[tracked[g] - 1]
            if hint is None:
                continue
            levels[g] = tracked[g]
            for row in range(g * size, (g + 1) * size):
                out[row] = self._hinted(prompts, ctx, row, hint)
        self._visit = list(zip(keys, levels))
        ctx.log("hint_level", sum(levels) / len(levels))
        ctx.acted(len(levels) - levels.count(0), of=len(levels), hint="no prompt's level rose above 0 (sage.level_up_at)")
        ctx.log("hinted_groups", sum(level > 0 for level in levels) / len(levels))
        if self.config.train_on_original:
            ctx.train_on_original = True
        return out

    @stackrl.hookimpl
    def generate_rollout(self, prompts, ctx):
        if self.config.mode != "sage" or not ctx.training:
            return None
        self._awaiting_rollout = False
        size = ctx.group_size
        answers = self._column(ctx.rollout_columns, "answer_column")
        samples = ctx.generate(prompts)
        original = list(samples)
        rewards = self._rewards([s.text for s in samples], answers).view(-1, size)
        # A group without an answer cannot be told unsolved: it gets no hint, and stays GRPO's.
        unsolved = [g for g in range(len(rewards)) if answers[g * size] is not None and not (rewards[g] > 0).any()]
        ctx.log("unsolved_groups", len(unsolved) / len(rewards))
        failed = len(unsolved)
        hints = self.bank.lookup([self._problem(prompts, ctx, g * size) for g in unsolved], ctx)
        hints = dict(zip(unsolved, hints))
        levels = [0] * len(rewards)
        for level in range(1, LEVELS + 1):
            # A group whose answer lacked this level's hint waits for the next level, as in the authors' code.
            todo = [g for g in unsolved if hints[g][level - 1] is not None]
            if not todo:
                continue
            rows = [row for g in todo for row in range(g * size, (g + 1) * size)]
            redone = ctx.generate([self._hinted(prompts, ctx, row, hints[row // size][level - 1]) for row in rows])
            for row, sample in zip(rows, redone):
                samples[row] = sample
            rewards[todo] = self._rewards([s.text for s in redone], [answers[row] for row in rows]).view(-1, size)
            for g in todo:
                levels[g] = level
            unsolved = [g for g in unsolved if not (rewards[g] > 0).any()]
        solved = (rewards > 0).any(dim=1).tolist()
        ctx.log("hint_level", sum(levels) / len(levels))
        ctx.log("rescued_groups", sum(ok and lv > 0 for ok, lv in zip(solved, levels)) / len(levels))
        ctx.acted(len(levels) - levels.count(0), of=len(levels), hint=(
            f"{failed} group(s) failed every completion; sage.hint_source '{self.config.hint_source}' gave none a hint"
            if failed else "no group failed every completion: sage hints only those"))
        trained_on = original if self.config.train_on_original else samples
        return stackrl.Samples(
            completion_ids=[s.completion_ids for s in samples], prompt_ids=[s.prompt_ids for s in trained_on]
        )

    # -- post-step --------------------------------------------------------------------------------------------------

    @stackrl.hookimpl
    def post_step(self, ctx):
        if self._awaiting_rollout:
            raise ConfigError(
                "sage: mode 'sage' generates through the hook generate_rollout, which another plugin answered "
                "(exclusive.generate_rollout); give it to 'sage' or use sage.mode=light"
            )
        if self._visit is None:  # mode sage, or a rollout already counted (steps_per_generation > 1)
            return
        visit, self._visit = self._visit, None
        rollout = ctx.rollout
        answers = self._column(rollout.columns, "answer_column")
        accuracy = self._rewards(rollout.completions, answers).view(-1, rollout.group_size).mean(dim=1)
        for group, ((key, level), value) in enumerate(zip(visit, accuracy.tolist(), strict=True)):
            if answers[group * rollout.group_size] is not None:  # without an answer, no accuracy to track
                self.tracker.update(key, level, value)
        ctx.log("tracked_prompts", len(self.tracker))

    # -- checkpoints ------------------------------------------------------------------------------------------------

    @stackrl.hookimpl
    def state_dict(self):
        return {"levels": dict(self.tracker.levels), "hints": {k: dict(v) for k, v in self.bank.entries.items()}}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.tracker.levels = dict(state["levels"])
        self.bank.entries = {k: dict(v) for k, v in state["hints"].items()}

    # -- helpers ----------------------------------------------------------------------------------------------------

    def _column(self, columns: dict, key: str) -> list:
        name = getattr(self.config, key)
        if name not in columns:
            raise ConfigError(
                f"sage.{key}: the dataset has no column '{name}'; columns: {', '.join(columns) or 'none'}"
                + (" (data.label_free hides the answer column)" if key == "answer_column" else "")
            )
        return columns[name]

    def _rewards(self, texts: list[str], answers: list) -> torch.Tensor:
        judge = OUTCOME_REWARDS[self.config.metric]
        return torch.tensor([judge(text, answer) for text, answer in zip(texts, answers, strict=True)])

    def _problem(self, prompts: list, ctx, row: int) -> Problem:
        solutions = self._column(ctx.rollout_columns, "solution_column")
        columns = {name: values[row] for name, values in ctx.rollout_columns.items()}
        return Problem(prompt_key(prompts[row]), prompt_text(prompts[row]), str(solutions[row]), columns)

    def _hinted(self, prompts: list, ctx, row: int, hint: str):
        columns = {name: values[row] for name, values in ctx.rollout_columns.items()}
        fields = {**columns, "prompt": prompt_text(prompts[row]), "hint": hint}
        return with_text(prompts[row], fill(self.config.hinted_prompt_template, "hinted_prompt_template", fields))
