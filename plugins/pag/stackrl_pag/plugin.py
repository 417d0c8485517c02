"""PAG: one trajectory per row, the policy answering and verifying in turns, revising only what it judged wrong.

A row's completion is: an answer, the injected verify instruction, a verification ending in a verdict; after a
"wrong" verdict, the injected revise instruction and a new answer, verified in its turn; up to ``turns`` answers
(the last one is not verified). Injected text is masked out of the loss. Each answer is rewarded by its
correctness (plus the shaping term on a revision), each verification by whether its verdict is right about the
answer it checked; each segment's tokens get that reward's advantage against the same segments of its group.
"""

from __future__ import annotations

from stackrl import Plugin, hookimpl
from stackrl.blocks.turns import (
    ANSWER, SEGMENTS_COLUMN, VERIFY, final_answer_rewards, judged_turns, packed_samples, rollout_segment_advantages,
    transitions, verifier_figures, verify_then_revise,
)
from stackrl.plugin import training_only
from stackrl_pag.config import PagConfig
from stackrl_pag.rewards import segment_rewards


def trajectories(prompts: list, ctx, config: PagConfig) -> list:
    """Answer, verify, and revise after a "wrong" verdict, for every prompt; the last answer is not verified."""
    return verify_then_revise(prompts, ctx, answers=config.turns, verify=config.verify_instruction,
                              revise=config.revise_instruction)


class Pag(Plugin):
    """The policy as its own generative verifier: it answers, verifies, and revises only what it judged wrong."""

    Config = PagConfig
    activity = "completions revised their answer after a 'wrong' verdict"

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        return packed_samples(trajectories(prompts, ctx, self.config))

    def outcomes(self, rollout) -> list[list]:
        """Per row, each segment's outcome: an answer's correctness, a verification's verdict."""
        return judged_turns(rollout, self.config.is_correct, plugin=self.name, column=self.config.answer_column)

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns:  # evaluation: plain solutions, scored by the outcome rewards
            return [None] * len(rollout)
        outcomes, segments = self.outcomes(rollout), rollout.columns[SEGMENTS_COLUMN]
        answers = [[o for s, o in zip(row, out) if s.kind == ANSWER] for row, out in zip(segments, outcomes)]
        verdicts = [next((o for s, o in zip(row, out) if s.kind == VERIFY), None) for row, out in zip(segments, outcomes)]
        if self.config.turns > 1:
            for name, value in verifier_figures([a[0] for a in answers], verdicts).items():
                ctx.log(f"verify_{name}", value)
        revised = [a for a in answers if len(a) > 1]
        ctx.log("revised", len(revised) / len(answers))
        ctx.acted(len(revised), of=len(answers), hint=f"no verification said wrong in pag.turns {self.config.turns}")
        if revised:
            for name, value in transitions([a[0] for a in revised], [a[1] for a in revised]).items():
                ctx.log(f"revised_{name}", value)
        # Advantages come from each segment's own reward.
        return final_answer_rewards(ctx, answers, first="first_answer_correct")

    @hookimpl
    def estimate_advantages(self, ctx):
        if SEGMENTS_COLUMN not in ctx.rollout.columns:
            return None
        values = [
            segment_rewards([s.kind for s in row], out, self.config.shaping)
            for row, out in zip(ctx.rollout.columns[SEGMENTS_COLUMN], self.outcomes(ctx.rollout))
        ]
        return rollout_segment_advantages(ctx.rollout, values)
