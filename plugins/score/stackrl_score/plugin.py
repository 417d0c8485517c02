"""SCoRe: every row is two attempts at its question, the second after an injected instruction to fix the first.

Stage I trains the second attempt on its correctness while a KL term to the reference holds the first attempt's
tokens, and only those, near the reference; stage II trains both attempts on their correctness, the second with
a bonus for changing a wrong answer into a right one (and a penalty for the reverse), without that KL. The
reference is the policy as training started, a snapshot the plugin keeps, so a run needs no ``trainer.beta`` (whose
KL TRL would add on every token, in stage II as well). The stage switches at ``stage_two_step`` and is part of the
plugin's checkpointed state.
"""

from __future__ import annotations

from stackrl import Plugin, hookimpl
from stackrl.blocks.kl import reference_kl
from stackrl.blocks.turns import (
    SEGMENTS_COLUMN, final_answer_rewards, first_turn, generate_turn, judged_segments, packed_samples,
    rollout_segment_advantages, transitions,
)
from stackrl.plugin import training_only
from stackrl_score.config import ScoreConfig
from stackrl_score.rewards import attempt_rewards

ANSWER = "answer"  # the kind of both attempts' segments
STAGE_COLUMN = "score_stage"  # column: the stage each row was generated in (1 or 2)


class Score(Plugin):
    Config = ScoreConfig
    activity = "completions made a second attempt, each attempt credited"

    def __init__(self, config=None):
        super().__init__(config)
        self.stage = 1 if self.config.stage_two_step > 0 else 2
        self.switched_at: int | None = None  # the step stage II began at

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
        return packed_samples(trajectories, {STAGE_COLUMN: [self.stage] * len(prompts)})

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

    @hookimpl
    def train_begin(self, ctx):
        if ctx.step == 0 and self.stage == 1 and self.config.first_attempt_kl:
            ctx.update_snapshot(self.name, checkpoint=True)  # the start, stage I's reference; a resume restores it

    @hookimpl
    def loss_term(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns or not self.config.first_attempt_kl:
            return None
        first = ctx.loss_mask.new_zeros(ctx.loss_mask.shape)
        for row, (segments, stage) in enumerate(zip(rollout.columns[SEGMENTS_COLUMN], rollout.columns[STAGE_COLUMN])):
            if stage == 1:  # stage II drops the KL
                first[row, segments[0].start : segments[0].end] = 1
        if not first.any():
            return None
        kl = reference_kl(ctx, first, model=self.name)
        ctx.log("first_attempt_kl", kl.item())
        return self.config.first_attempt_kl * kl

    @hookimpl
    def post_step(self, ctx):
        if self.stage == 1 and ctx.step >= self.config.stage_two_step:
            self.stage, self.switched_at = 2, ctx.step
        ctx.log("stage", self.stage)

    @hookimpl
    def state_dict(self):
        return {"stage": self.stage, "switched_at": self.switched_at}

    @hookimpl
    def load_state_dict(self, state):
        self.stage, self.switched_at = int(state["stage"]), state["switched_at"]
