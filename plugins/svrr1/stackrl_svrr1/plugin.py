"""SVR-R1: the policy answers, gives itself a yes/no verdict, and rethinks only after a "no", in one trajectory.

A row's completion is an answer, the injected verify instruction and a verification ending in a verdict; after a
"no" ("wrong"), the injected rethink instruction and a new answer, verified in its turn; a "yes" (or no verdict)
or the turn cap ends it. Injected text is masked out of the loss. The row's one reward is its final answer's
correctness, and GRPO's advantage of it reaches every token the policy wrote: the answers and the verdicts alike,
so a verdict is trained only by the outcome it led to, with no reward of its own.
"""

from __future__ import annotations

from stackrl import Plugin, hookimpl
from stackrl.blocks.turns import (
    ANSWER, SEGMENTS_COLUMN, VERIFY, final_answer_rewards, judged_segments, packed_samples, transitions,
    verify_then_revise,
)
from stackrl.plugin import training_only
from stackrl_svrr1.config import SvrR1Config


class SvrR1(Plugin):
    """Self-verification as a turn of the rollout: a "no" buys a rethink, the final answer's outcome pays for all."""

    Config = SvrR1Config
    activity = "completions rethought their answer after a 'no' self-verdict"

    def trajectories(self, prompts: list, ctx) -> list:
        """Answer and self-verify, and rethink after each "no", up to ``turns`` answers, for every prompt."""
        settings = self.config
        return verify_then_revise(prompts, ctx, answers=settings.turns, verify=settings.verify_instruction,
                                  revise=settings.rethink_instruction, verify_last=settings.verify_last)

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        return packed_samples(self.trajectories(prompts, ctx))

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns:  # evaluation: plain solutions, scored by the outcome rewards
            return [None] * len(rollout)
        def right(segment, answer):
            return self.config.is_correct(segment.text, answer) if segment.kind == ANSWER else None

        judged = judged_segments(rollout, right, plugin=self.name, column=self.config.answer_column,
                                 purpose="judge final answers against")
        answers = [[r for s, r in zip(segments, row) if s.kind == ANSWER]
                   for segments, row in zip(rollout.columns[SEGMENTS_COLUMN], judged)]
        verifications = [sum(s.kind == VERIFY for s in segments) for segments in rollout.columns[SEGMENTS_COLUMN]]
        rethought = [a for a in answers if len(a) > 1]
        ctx.log("verifications", sum(verifications) / len(verifications))  # the paper's "verification turns"
        ctx.log("rethought", len(rethought) / len(answers))
        ctx.acted(len(rethought), of=len(answers),
                  hint=f"no self-verdict said no within svrr1.turns {self.config.turns}")
        if rethought:
            for name, value in transitions([a[0] for a in rethought], [a[-1] for a in rethought]).items():
                ctx.log(f"rethought_{name}", value)
        # The outcome reward: GRPO's advantage of it covers every token the policy wrote, verdicts included.
        return final_answer_rewards(ctx, answers, first="first_answer_correct")
