"""Octopus: each group's sampled two-attempt rows, and more rows recombined from them, balanced.

A sampled row is a first attempt, the injected marker, and a second attempt sampled after both. The group's other
rows pair the first attempt of one sampled row with the second attempt of another (:mod:`stackrl_octopus.selection`
chooses which, so that wrong -> right pairs are many and positives balance negatives). Every row is rewarded by the
shaped self-correction reward of its pair; GRPO's advantage of it reaches the second attempt, and the first
attempt only in stage II and only where both attempts are right or both wrong (the selective response mask), while
stage I holds the first attempt near the starting policy with a KL term instead. The stage switches at
``stage_two_step`` and is part of the plugin's checkpointed state.
"""

from __future__ import annotations

import random

from stackrl import ConfigError, hookimpl
from stackrl.blocks.turns import (
    ANSWER, SEGMENTS_COLUMN, Trajectory, TwoStages, first_turn, generate_turn, packed_samples,
)
from stackrl.plugin import training_only
from stackrl.rewards import extract_answer, reference_answers
from stackrl_octopus.config import OctopusConfig
from stackrl_octopus.rewards import correction_reward
from stackrl_octopus.selection import KINDS, FIX, select_pairs

PAIR_COLUMN = "octopus_pair"  # column: (i, j), the group's sampled rows whose first and second attempt a row holds
STAGE_COLUMN = "octopus_stage"  # column: the stage each row was generated in (1 or 2)


def spliced(first: Trajectory, second: Trajectory, marker: list[int], eos_token_ids) -> Trajectory:
    """The first attempt of ``first``, the marker, and the second attempt of ``second``: a recombined row."""
    ids, _, segments = first.packed()
    other, _, other_segments = second.packed()
    row = Trajectory(first.prompt_ids)
    row.add(ANSWER, ids[segments[0].start : segments[0].end], segments[0].text, eos_token_ids)
    row.inject(marker)
    row.add(ANSWER, other[other_segments[1].start : other_segments[1].end], other_segments[1].text, eos_token_ids)
    return row


class Octopus(TwoStages):
    """Dense self-correction rows recombined from a group's own attempts, first attempts masked where they conflict."""

    Config = OctopusConfig
    activity = "completions were recombined from two sampled attempts"
    stage_column = STAGE_COLUMN

    def check_run(self, run):
        if run.group_size is not None and self.config.sampled(run.group_size) < 2:
            raise ConfigError(
                f"octopus.sampled_share: samples {self.config.sampled(run.group_size)} of the group's "
                f"{run.group_size} rows; recombining needs two (raise it or trainer.num_generations)"
            )
        return [run.past_end("octopus.stage_two_step", self.config.stage_two_step + 1, "stage II trains")]

    def judged(self, text: str, answer) -> bool | None:
        """An attempt's correctness, ``None`` where it states no answer or the row has none to judge it by."""
        if answer is None or extract_answer(text) is None:
            return None
        return self.config.is_correct(text, answer)

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        size = ctx.group_size
        n = self.config.sampled(size)
        marker = ctx.tokenizer(self.config.marker, add_special_tokens=False)["input_ids"]
        sampled = first_turn([prompts[g + r] for g in range(0, len(prompts), size) for r in range(n)], ANSWER, ctx)
        for row in sampled:
            row.inject(marker)
        generate_turn(sampled, ANSWER, ctx)
        answers = reference_answers(ctx.rollout_columns, self.config.answer_column, plugin=self.name,
                                    purpose="judge the attempts it recombines against")
        rng = random.Random(ctx.step)  # the same draw on every process, and again after a resume
        rows, pairs = [], []
        for group in range(len(prompts) // size):
            mine, answer = sampled[group * n : (group + 1) * n], answers[group * size]
            first = [self.judged(row.segments[0].text, answer) for row in mine]
            second = [self.judged(row.segments[1].text, answer) for row in mine]
            added = select_pairs(first, second, size - n, size, self.config.selection, rng)
            chosen = [(i, i) for i in range(n)] + added
            for i, j in chosen:
                rows.append(mine[i] if i == j else spliced(mine[i], mine[j], marker, ctx.eos_token_ids))
                pairs.append((i, j))
        return packed_samples(rows, {PAIR_COLUMN: pairs, **self.stage_columns(len(rows))})

    def _attempts(self, rollout) -> list[tuple[bool | None, bool | None]]:
        answers = reference_answers(rollout.columns, self.config.answer_column, plugin=self.name,
                                    purpose="judge attempts against")
        return [(self.judged(s[0].text, a), self.judged(s[1].text, a))
                for s, a in zip(rollout.columns[SEGMENTS_COLUMN], answers)]

    @hookimpl
    def reward(self, ctx):
        columns = ctx.rollout.columns
        if PAIR_COLUMN not in columns:  # evaluation: plain solutions, scored by the outcome rewards
            return [None] * len(ctx.rollout)
        attempts, pairs, segments = self._attempts(ctx.rollout), columns[PAIR_COLUMN], columns[SEGMENTS_COLUMN]
        ctx.acted(sum(i != j for i, j in pairs), of=len(pairs))
        kinds = [KINDS.get((bool(a), bool(b))) for a, b in attempts]
        sampled = [kind for kind, (i, j) in zip(kinds, pairs) if i == j]
        ctx.log("fix_share", kinds.count(FIX) / len(kinds))  # wrong -> right rows trained on, of all rows
        ctx.log("sampled_fix_share", sampled.count(FIX) / max(len(sampled), 1))  # ... of the rows as sampled
        ctx.log("positive_share", sum(bool(b) for _, b in attempts) / len(attempts))
        return [correction_reward(a, b, s[0].text == s[1].text, self.config) for (a, b), s in zip(attempts, segments)]

    def masked_first(self, rollout) -> list[bool]:
        """Per row, whether its first attempt stays out of the policy loss: every row of stage I, and in stage II
        the rows whose two attempts differ in correctness (an unanswered attempt is wrong)."""
        stages = rollout.columns[STAGE_COLUMN]
        return [stage == 1 or bool(a) != bool(b) for stage, (a, b) in zip(stages, self._attempts(rollout))]

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        rollout = ctx.rollout
        if PAIR_COLUMN not in rollout.columns:
            return None
        width = rollout.completion_mask().size(1)
        out = advantages.unsqueeze(1).expand(-1, width).clone() if advantages.dim() == 1 else advantages.clone()
        masked = self.masked_first(rollout)
        for row, (segments, mask) in enumerate(zip(rollout.columns[SEGMENTS_COLUMN], masked)):
            if mask:
                out[row, segments[0].start : segments[0].end] = 0.0
        ctx.log("first_attempt_trained", 1 - sum(masked) / len(masked))
        return out
