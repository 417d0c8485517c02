"""SCoRe: every row is two attempts at its question, the second after an injected instruction to fix the first.

Stage I trains the second attempt on its correctness while a KL term to the reference holds the first attempt's
tokens, and only those, near the reference; stage II trains both attempts on their correctness, the second with
a bonus for changing a wrong answer into a right one (and a penalty for the reverse), without that KL. The
reference is the policy as training started, a snapshot the plugin keeps, so a run needs no ``trainer.beta`` (whose
KL TRL would add on every token, in stage II as well). The stage switches at ``stage_two_step`` and is part of the
plugin's checkpointed state.
"""

from __future__ import annotations

from stackrl import hookimpl
from stackrl.blocks.turns import (
    SEGMENTS_COLUMN, TwoStages, final_answer_rewards, first_turn, generate_turn, judged_segments, packed_samples,
    rollout_segment_advantages, transitions,
)
from stackrl.plugin import training_only
from stackrl_score.config import ScoreConfig
from stackrl_score.rewards import attempt_rewards

ANSWER = "answer"  # the kind of both attempts' segments
STAGE_COLUMN = "score_stage"  # column: the stage each row was generated in (1 or 2)


class Score(TwoStages):
    Config = ScoreConfig
    activity = "completions made a second attempt, each attempt credited"
    stage_column = STAGE_COLUMN

    def check_run(self, run):
        # Stage II begins after the step `stage_two_step`: its first rollout trains the step after.
        return [run.past_end("score.stage_two_step", self.config.stage_two_step + 1, "stage II trains")]

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        instruction = ctx.tokenizer(self.config.instruction, add_special_tokens=False)["input_ids"]
        trajectories = first_turn(prompts, ANSWER, ctx)
        for trajectory in trajectories:
            trajectory.inject(instruction)
        generate_turn(trajectories, ANSWER, ctx)
        return packed_samples(trajectories, self.stage_columns(len(prompts)))

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns:  # evaluation: plain solutions, scored by the outcome rewards
            return [None] * len(rollout)
        correct = self._correct(rollout)
        ctx.acted(sum(len(c) > 1 for c in correct), of=len(correct))
        for name, value in transitions([c[0] for c in correct], [c[1] for c in correct]).items():
            ctx.log(name, value)
        # Advantages come from each attempt's own reward.
        return final_answer_rewards(ctx, correct, first="first_attempt_correct")

    @hookimpl
    def estimate_advantages(self, ctx):
        if SEGMENTS_COLUMN not in ctx.rollout.columns:
            return None
        correct, stages = self._correct(ctx.rollout), ctx.rollout.columns[STAGE_COLUMN]
        values = [attempt_rewards(*c, stage, self.config.bonus) for c, stage in zip(correct, stages)]
        return rollout_segment_advantages(ctx.rollout, values)

    def _correct(self, rollout) -> list[list[bool]]:
        """Each row's [first attempt right, second attempt right]."""
        right = lambda segment, answer: self.config.is_correct(segment.text, answer)  # noqa: E731
        return judged_segments(rollout, right, plugin=self.name, column=self.config.answer_column,
                               purpose="judge attempts against")
