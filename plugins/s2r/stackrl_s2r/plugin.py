"""S^2R: the policy answers, verifies its answer, and answers again after a "wrong" verdict, in one trajectory;
outcome-level or process-level RL on it.

A row's completion is an answer, the injected verify instruction and a verification ending in a verdict; after a
"wrong" verdict, the injected revise instruction and a new answer, verified in its turn, up to ``answers`` answers
(the last one's verdict ends the row). Injected text is masked out of the loss. At the process level each turn
earns +1 or -1 (an answer: right or wrong; a verification: its verdict right or wrong about the answer it checks),
its advantage is that reward less the running mean of the rewards earned after the same history of turns
(:mod:`stackrl_s2r.credit`), doubled for a verification of a right answer and for an answer that changed the
previous one's correctness, on the turn's tokens only. At the outcome level the final answer's +1 or -1, less
the mean of its group's others, covers every token.
"""

from __future__ import annotations

from stackrl import Plugin, hookimpl
from stackrl.blocks.roles import broadcast_segments
from stackrl.blocks.turns import (
    ANSWER, SEGMENTS_COLUMN, VERIFY, final_answer_rewards, judged_turns, log_revisions, packed_samples,
    verify_then_revise,
)
from stackrl.plugin import training_only
from stackrl_s2r.config import S2rConfig
from stackrl_s2r.credit import HistoryBaseline, histories, leave_one_out, turn_advantages, turn_rewards


class S2r(Plugin):
    """Self-verify and self-correct in one trajectory, each verify and correct turn credited on its own."""

    Config = S2rConfig
    activity = "completions corrected their answer after a 'wrong' self-verdict"

    def __init__(self, config: S2rConfig | None = None):
        super().__init__(config)
        self.baseline = HistoryBaseline(self.config.min_count)

    def trajectories(self, prompts: list, ctx) -> list:
        """Answer and verify, and answer again after each "wrong" verdict, up to ``answers`` answers, for every
        prompt; every answer is verified."""
        settings = self.config
        return verify_then_revise(prompts, ctx, answers=settings.answers, verify=settings.verify_instruction,
                                  revise=settings.revise_instruction, verify_last=True)

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        return packed_samples(self.trajectories(prompts, ctx))

    def turns(self, rollout) -> tuple[list[list[str]], list[list], list[list[int]]]:
        """Each row's segment kinds, their outcomes (an answer's correctness, a verification's verdict) and their
        +1/-1 rewards (:func:`stackrl_s2r.credit.turn_rewards`)."""
        outcomes = judged_turns(rollout, self.config.is_correct, plugin=self.name, column=self.config.answer_column)
        kinds = [[s.kind for s in row] for row in rollout.columns[SEGMENTS_COLUMN]]
        return kinds, outcomes, [turn_rewards(k, o) for k, o in zip(kinds, outcomes)]

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns:  # evaluation: plain solutions, scored by the outcome rewards
            return [None] * len(rollout)
        kinds, outcomes, rewards = self.turns(rollout)
        answers = [[bool(o) for k, o in zip(ks, os) if k == ANSWER] for ks, os in zip(kinds, outcomes)]
        checks = [[r > 0 for k, r in zip(ks, rs) if k == VERIFY] for ks, rs in zip(kinds, rewards)]
        corrected = log_revisions(ctx, kinds, outcomes, answers, checks, right_key="verify_right",
                                  revised_key="corrected")
        ctx.acted(len(corrected), of=len(answers),
                  hint=f"no self-verification said wrong within s2r.answers {self.config.answers}")
        # The component is the final answer's correctness; the advantages are the plugin's (estimate_advantages).
        return final_answer_rewards(ctx, answers, first="first_answer_correct")

    @hookimpl
    def estimate_advantages(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns:
            return None
        kinds, _, rewards = self.turns(rollout)
        if self.config.level == "outcome":
            final = [[r for k, r in zip(ks, rs) if k == ANSWER][-1] for ks, rs in zip(kinds, rewards)]
            return leave_one_out(final, rollout.group_size)
        settings = self.config
        values = [turn_advantages(k, r, self.baseline, verify_bonus=settings.verify_bonus,
                                  change_bonus=settings.change_bonus) for k, r in zip(kinds, rewards)]
        for k, r in zip(kinds, rewards):  # the batch joins the running means after its own advantages
            self.baseline.add(histories(k, r), r)
        ctx.log("histories", len(self.baseline.counts))
        spans = [[(s.start, s.end) for s in row] for row in rollout.columns[SEGMENTS_COLUMN]]
        return broadcast_segments(values, spans, rollout.completion_mask().size(1))

    @hookimpl
    def state_dict(self):
        return self.baseline.state_dict()

    @hookimpl
    def load_state_dict(self, state):
        self.baseline.load_state_dict(state)
