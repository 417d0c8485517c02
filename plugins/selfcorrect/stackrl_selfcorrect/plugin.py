"""Self-rewarding correction: one model answers, judges its own answer, and revises only what it judged wrong.

Stage 1 (the first ``collect_steps`` steps) builds self-correction trajectories by sequential rejection sampling
(:mod:`stackrl_selfcorrect.collection`); at the end of its last step the weights go back to the start of training
and are fine-tuned on the kept trajectories (``ctx.supervised_phase``). Stage 2 is RL on the trajectory the
fine-tuned policy writes: an answer, the injected verify instruction and a verification ending in a verdict;
after "wrong", the injected revise instruction and a new answer; "correct" (or no verdict) stops the row. The
row's one reward is its final answer's correctness plus ``verdict_weight`` times the share of its verdicts that
were right, and GRPO's advantage of it trains every token the policy wrote. Injected text is masked out.
"""

from __future__ import annotations

from stackrl import Plugin, hookimpl
from stackrl.blocks.turns import (
    ANSWER, SEGMENTS_COLUMN, final_answer_rewards, judged_turns, log_revisions, packed_samples, verdicts_right,
    verify_then_revise,
)
from stackrl.plugin import training_only
from stackrl.rewards import reference_answers
from stackrl_selfcorrect.collection import KINDS, collect
from stackrl_selfcorrect.config import SelfcorrectConfig

START = "selfcorrect_start"  # the weights training began from: stage 1's fine-tuning starts from them
STAGE_COLUMN = "selfcorrect_stage"  # each row's stage


class Selfcorrect(Plugin):
    """Self-rewarding correction: rejection-sampled self-correction fine-tuning, then RL with rule-based rewards."""

    Config = SelfcorrectConfig
    activity = ("completions held a self-verdict that matched the truth, kept for fine-tuning (stage 1) or "
                "rewarded (stage 2)")

    def __init__(self, config=None):
        super().__init__(config)
        self.stage = 1 if self.config.collect_steps else 2
        self.pairs: list[tuple[list[int], list[int]]] = []  # stage 1's kept (context, completion) token pairs
        self.kept = dict.fromkeys(KINDS, 0)

    def check_run(self, run):
        return [run.past_end("selfcorrect.collect_steps", self.config.collect_steps + 1,
                             "RL on the fine-tuned self-correcting policy starts")]

    def trajectories(self, prompts: list, ctx) -> list:
        """Stage 2's trajectories: answer, verify, and revise after "wrong", up to ``turns`` answers."""
        s = self.config
        return verify_then_revise(prompts, ctx, answers=s.turns, verify=s.verify_instruction,
                                  revise=s.revise_instruction, verify_last=s.verify_last)

    @hookimpl
    def train_begin(self, ctx):
        if ctx.step == 0 and self.stage == 1:
            ctx.update_snapshot(START, checkpoint=True)  # a resume inside stage 1 restores it

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        if self.stage == 2:
            return packed_samples(self.trajectories(prompts, ctx), {STAGE_COLUMN: [2] * len(prompts)})
        answers = reference_answers(ctx.rollout_columns, self.config.answer_column, plugin=self.name,
                                    purpose="keep trajectories by")
        collected = collect(prompts, answers, ctx, self.config)
        self.pairs += collected.pairs
        for kind, n in collected.kept.items():
            self.kept[kind] += n
            ctx.log(f"kept_{kind}", n / len(prompts))
        ctx.acted(collected.kept["stopped"] + collected.kept["wrong_to_right"], of=len(prompts),
                  hint=f"no first answer got a verdict matching the truth in selfcorrect.verdict_tries "
                       f"{self.config.verdict_tries}, or no revision came out right")
        return packed_samples(collected.rows, {STAGE_COLUMN: [1] * len(prompts)})

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns:  # evaluation: plain solutions, scored by the outcome rewards
            return [None] * len(rollout)
        kinds = [[s.kind for s in row] for row in rollout.columns[SEGMENTS_COLUMN]]
        outcomes = judged_turns(rollout, self.config.is_correct, plugin=self.name, column=self.config.answer_column)
        answers = [[o for k, o in zip(ks, out) if k == ANSWER] for ks, out in zip(kinds, outcomes)]
        right = [verdicts_right(ks, out) for ks, out in zip(kinds, outcomes)]
        final = final_answer_rewards(ctx, answers, first="first_answer_correct")
        if rollout.columns.get(STAGE_COLUMN, [2])[0] == 2:  # stage 1's rows are filtered: it reports what it kept
            self._log_trajectories(ctx, kinds, outcomes, answers, right)
        # The verdict that stops a row is paid like the others: "correct" to a wrong answer ends the row with it,
        # losing both parts; "wrong" to a right answer loses its part even where the revision stays right.
        weight = self.config.verdict_weight
        return [None if truth is None else f + weight * (sum(r) / len(r) if r else 0.0)  # no answer: not scored
                for f, r, truth in zip(final, right, rollout.columns[self.config.answer_column])]

    @staticmethod
    def _log_trajectories(ctx, kinds, outcomes, answers, right) -> None:
        """The paper's figures of the policy's own trajectories (the first verdict as a classifier of the first
        answer, the share of right verdicts, the revisions and what they did), and the activity."""
        log_revisions(ctx, kinds, outcomes, answers, right, right_key="verdicts_right", revised_key="revised")
        ctx.acted(sum(any(r) for r in right), of=len(answers),
                  hint="no self-verdict matched the truth: the judge format may be unknown to the model")

    @hookimpl
    def post_step(self, ctx):
        if self.stage == 1 and ctx.step >= self.config.collect_steps:
            s = self.config
            for kind, n in self.kept.items():
                ctx.log(f"fine_tuned_{kind}", n)
            if self.pairs:
                ctx.supervised_phase("self_rewarding_ift", [c for c, _ in self.pairs], [k for _, k in self.pairs],
                                     restore=START, learning_rate=s.sft_learning_rate, epochs=s.sft_epochs,
                                     batch_size=s.sft_batch_size)
            else:  # nothing to fine-tune on (another plugin generated, or no row passed): RL goes on as it is
                ctx.warn("nothing_kept")
            self.stage, self.pairs = 2, []
        ctx.log("stage", self.stage)

    @hookimpl
    def state_dict(self):
        return {"stage": self.stage, "pairs": [[list(c), list(k)] for c, k in self.pairs], "kept": dict(self.kept)}

    @hookimpl
    def load_state_dict(self, state):
        self.stage = int(state["stage"])
        self.pairs = [(list(c), list(k)) for c, k in state["pairs"]]
        self.kept = dict(state["kept"])
