"""RFTT: functional tokens added to the vocabulary, an SFT warm-up on the policy's own attempts annotated with them,
then GRPO on the outcome reward, the policy sampling the tokens as it explores.

Paper: Reasoning with Reinforced Functional Token Tuning (Zhang et al., arXiv 2502.13389). Code followed:
github.com/sastpg/RFTT at 948f89e (the token formats and the outcome reward of its ORM run).
"""

from __future__ import annotations

import stackrl
from stackrl.blocks.supervised import SupervisedPairs
from stackrl.rewards import exact_match, reference_answers
from stackrl_rftt.annotate import annotated, functional_use
from stackrl_rftt.config import RfttConfig

PHASE = "rftt_warmup"  # the warm-up's name in the logs: phase/rftt_warmup/...
USES = ("none", "verify", "refine", "malformed")


class Rftt(stackrl.Plugin):
    """Until ``warmup_step`` it collects the policy's attempts annotated with ``<verify>`` / ``<refine>``; after
    that step it fine-tunes the policy on them once; from then on the reward is the final answer's correctness,
    read after the last ``<refine>`` as the authors read the last boxed answer."""

    Config = RfttConfig
    activity = "completions used a functional token"

    def __init__(self, config=None):
        super().__init__(config)
        self.buffer = SupervisedPairs(PHASE)
        self.warmed = False

    def check_run(self, run):
        return [run.past_end("rftt.warmup_step", self.config.warmup_step + 1, "RL on the warmed-up policy starts")]

    def reward_weight(self):
        # The rollouts before the warm-up only feed it (the authors' RL starts from the SFT model).
        return {0: 0.0, self.config.warmup_step: 1.0}

    def _check_tokens(self, ctx) -> None:
        """Warn where a functional token is not an added token of the model: it is then written as plain text, as in
        the authors' released SFT config (which adds none), and has no row of its own to train."""
        added = ctx.tokenizer.get_added_vocab()
        for key in ("verify_token", "refine_token"):
            if getattr(self.config, key) not in added:
                ctx.warn(f"{key}_not_added")

    @stackrl.hookimpl
    def reward(self, ctx):
        self._check_tokens(ctx)
        rollout, s = ctx.rollout, self.config
        answers = reference_answers(rollout.columns, s.answer_column, plugin=self.name, purpose="score the outcome by")
        uses = [functional_use(c, s.verify_token, s.refine_token) for c in rollout.completions]
        for use in USES:
            ctx.log(f"use_{use}", uses.count(use) / len(uses))
        refined = [i for i, use in enumerate(uses) if use == "refine"]
        if refined:  # the share of refinements whose final answer is right after a wrong first one
            fixed = [exact_match(rollout.completions[i].split(s.refine_token)[0], answers[i]) == 0.0
                     and exact_match(rollout.completions[i], answers[i]) == 1.0 for i in refined]
            ctx.log("refine_fixed", sum(fixed) / len(refined))
        ctx.acted(len(uses) - uses.count("none"), of=len(uses),
                  hint="no completion used a functional token: the warm-up may not have run yet")
        return [None if a is None else exact_match(c, a) for c, a in zip(rollout.completions, answers)]

    @stackrl.hookimpl
    def post_step(self, ctx):
        if self.warmed:
            return
        self._collect(ctx)
        if ctx.step < self.config.warmup_step:
            return
        s = self.config
        ctx.log("pairs", len(self.buffer))
        if self.buffer.pairs:
            ctx.supervised_phase(PHASE, [c for c, _ in self.buffer.pairs], [t for _, t in self.buffer.pairs],
                                 learning_rate=s.sft_learning_rate, epochs=s.sft_epochs, batch_size=s.sft_batch_size)
        else:
            ctx.warn("no_attempt_annotated")
        self.buffer.pairs, self.warmed = [], True

    def _collect(self, ctx) -> None:
        """Annotate each attempt of the step's rollout that the check can account for, once each."""
        rollout, s = ctx.rollout, self.config
        if rollout is None or s.solution_column not in rollout.columns:
            return
        eos = [] if ctx.tokenizer.eos_token_id is None else [ctx.tokenizer.eos_token_id]
        added = 0
        for prompt, completion, answer, solution in zip(rollout.prompts, rollout.completions,
                                                        rollout.columns[s.answer_column], rollout.columns[s.solution_column]):
            target = annotated(completion, answer, solution, s.verify_token, s.refine_token)
            if target is not None:
                added += self.buffer.add(prompt, ctx.tokenizer(target, add_special_tokens=False)["input_ids"] + eos)
        ctx.log("annotated", added)

    @stackrl.hookimpl
    def state_dict(self):
        return {"warmed": self.warmed, **self.buffer.state_dict()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.warmed = state["warmed"]
        self.buffer.load_state_dict(state)
