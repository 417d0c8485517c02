"""SCFT + RLERR: the policy critiques its own answers, is fine-tuned on the critiques that end right, and is
rewarded in RL for reflections that correct.

Every training row is an answer, then the policy's critique of it (:mod:`stackrl_scft.critiques`): the check after
the injected critique instruction, and after a "wrong" verdict the injected retry instruction and a corrected
solution; injected text is masked out of the loss. SCFT: the critiques the authors' filter keeps are collected at
each step and every ``every`` steps the policy is fine-tuned on them (``stackrl.blocks.supervised``), the critique
trained and the answer context. RLERR: the row's reward is its final answer's correctness plus the score of its
reflection (:mod:`stackrl_scft.reflection`); with ``rl_after_phase`` the reward weighs 0 until the first phase, so
RL starts from the SCFT policy as the authors' does.
"""

from __future__ import annotations

from stackrl import Plugin, hookimpl
from stackrl.blocks.supervised import SupervisedPairs
from stackrl.blocks.turns import SEGMENTS_COLUMN, packed_samples, transitions, verify_then_revise
from stackrl.plugin import training_only
from stackrl.rewards import reference_answers
from stackrl_scft.config import ScftConfig
from stackrl_scft.critiques import CONFIRM, FIX, kept_critique, phase_rows
from stackrl_scft.reflection import CASES, row_reward

PHASE = "scft"  # the supervised phase's name in the logs: phase/scft/...


class Scft(Plugin):
    """Self-critique fine-tuning on filtered self-critiques, and RL with effective-reflection rewards."""

    Config = ScftConfig
    activity = "completions held a self-critique with a verdict, scored by the reflection reward"

    def __init__(self, config=None):
        super().__init__(config)
        self.buffer = SupervisedPairs(PHASE)
        self.kept: dict[str, list] = {FIX: [], CONFIRM: []}  # each kept row's pairs, since the last phase

    def check_run(self, run):
        return [run.past_end("scft.every", self.config.every, "the first self-critique fine-tuning comes")]

    def reward_weight(self):
        return {0: 0.0, self.config.every: 1.0} if self.config.rl_after_phase else 1.0

    def critiques(self, prompts: list, ctx) -> list:
        """Each prompt's answer and the policy's critique of it."""
        s = self.config
        return verify_then_revise(prompts, ctx, answers=2, verify=s.critique_instruction, revise=s.revise_instruction)

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        rows = self.critiques(prompts, ctx)
        answers = reference_answers(ctx.rollout_columns, self.config.answer_column, plugin=self.name,
                                    purpose="filter the self-critiques by")
        for row, answer in zip(rows, answers):
            kept = kept_critique(row, answer, self.config.is_correct, strict=self.config.strict_verdict)
            if kept is not None:
                self.kept[kept[0]].append(kept[1])
        return packed_samples(rows)

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if SEGMENTS_COLUMN not in rollout.columns:  # evaluation: plain solutions, scored by the outcome rewards
            return [None] * len(rollout)
        answers = reference_answers(rollout.columns, self.config.answer_column, plugin=self.name,
                                    purpose="score the reflections against")
        rewards, cases, first, final = [], [], [], []
        for segments, answer in zip(rollout.columns[SEGMENTS_COLUMN], answers):
            if answer is None:  # no reference: not scored
                rewards.append(None)
                continue
            reward, case, right = row_reward(segments, answer, self.config)
            rewards.append(reward)
            cases.append(case)
            first.append(self.config.is_correct(segments[0].text, answer))
            final.append(right)
        self._log(ctx, cases, first, final, len(rollout))
        return rewards

    @staticmethod
    def _log(ctx, cases, first, final, rows) -> None:
        """The cases' shares, the effective reflection ratio (the authors' ERR, one reflection a row: the share of
        reflections whose row ends right), the first answer's accuracy and what the critique did to it."""
        reflected = [right for case, right in zip(cases, final) if case != "silent"]
        if cases:
            for case in CASES:
                ctx.log(f"case_{case}", cases.count(case) / len(cases))
            ctx.log("first_answer_correct", sum(first) / len(first))
            for name, value in transitions(first, final).items():
                ctx.log(name, value)
        if reflected:
            ctx.log("err", sum(reflected) / len(reflected))
        ctx.acted(len(reflected), of=rows, hint="no critique ended in a verdict: the judge format may be unknown to the model")

    @hookimpl
    def post_step(self, ctx):
        if ctx.step % self.config.every == 0:
            fixes, confirms = self.kept[FIX], self.kept[CONFIRM]
            chosen = phase_rows(fixes, confirms, self.config.confirm_per_fix)
            ctx.log("kept_fix", len(fixes))
            ctx.log("kept_confirm", len(chosen) - len(fixes))
            for pairs in chosen:
                for context, target in pairs:
                    self.buffer.add(context, target)
            self.kept = {FIX: [], CONFIRM: []}
        self.buffer.phase_due(ctx, self.config, nothing="no_critiques_kept")

    @hookimpl
    def state_dict(self):
        return {"kept": {k: [[[list(c), list(t)] for c, t in row] for row in rows] for k, rows in self.kept.items()},
                **self.buffer.state_dict()}

    @hookimpl
    def load_state_dict(self, state):
        self.kept = {k: [[(list(c), list(t)) for c, t in row] for row in rows] for k, rows in state["kept"].items()}
        self.buffer.load_state_dict(state)
