"""SDRL: some groups solve their question alone, the others answer it again after a debate context.

A debate group first samples ``candidates`` solutions to its question with ``ctx.generate``, shows
``context_size`` of them after the question, distinct final answers first, and its rows are responses to that
context. Both kinds of row are solutions: the built-in outcome rewards score them, and TRL normalises each group
on its own, so solving alone and answering after the debate are optimised in one update.
"""

from __future__ import annotations

from stackrl import Plugin, Samples, hookimpl
from stackrl.answers import extractor_of
from stackrl.rewards import OUTCOME_REWARDS, reference_answers
from stackrl.roles import RETRY, ROLE_COLUMN, SOLVE, assign_roles, first_turns, rows_of_groups, text_prompt
from stackrl_sdrl.config import SdrlConfig
from stackrl_sdrl.debate import debate_prompt, diverse_candidates

# column: per debate row, the correctness of each candidate shown (None: a solve row, or one without an answer)
CONTEXT_CORRECT = "context_correct"
CANDIDATE_ANSWERS = "candidate_answers"  # column: per debate row, the final answer of every candidate sampled


class Sdrl(Plugin):
    Config = SdrlConfig
    activity = "groups answered after a debate context"

    def __init__(self, config=None):
        super().__init__(config)
        extractor_of(self.config, "sdrl")  # refuses a bad answer_regex before training
        self.is_correct = OUTCOME_REWARDS[self.config.metric]
        share = self.config.debate_share
        self.shares = {RETRY: 1.0} if share == 1 else {SOLVE: 1 - share, RETRY: share}

    def _answers(self, columns: dict) -> list:
        return reference_answers(columns, self.config.answer_column, plugin=self.name,
                                 purpose="judge the candidates against, for the logged figures")

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures plain solving
            return None
        size, config = ctx.group_size, self.config
        extract = extractor_of(config, "sdrl", ctx.answer_format)
        answers = self._answers(ctx.rollout_columns)
        group_roles = assign_roles(len(prompts) // size, self.shares, key="sdrl.debate_share")
        pools = first_turns(prompts, group_roles, {RETRY}, ctx, samples=config.candidates)
        ctx.acted(len(pools), of=len(group_roles))
        contexts, shown, pooled = {}, {}, {}
        for group, candidates in pools.items():
            texts = [c.text for c in candidates]
            pooled[group] = [extract(t) for t in texts]
            chosen = [texts[i] for i in diverse_candidates(texts, config.context_size, extract, config.math_verify)]
            contexts[group] = debate_prompt(text_prompt(prompts[group * size], role=RETRY), chosen, config.candidate_template)
            answer = answers[group * size]  # none: the candidates' correctness is unknown
            shown[group] = None if answer is None else [bool(self.is_correct(t, answer)) for t in chosen]
        generations = ctx.generate([contexts.get(i // size, prompt) for i, prompt in enumerate(prompts)])
        return Samples(
            completion_ids=[g.completion_ids for g in generations],
            prompt_ids=[g.prompt_ids for g in generations],
            columns={
                ROLE_COLUMN: rows_of_groups(group_roles, size),
                CONTEXT_CORRECT: [shown.get(i // size) for i in range(len(prompts))],
                CANDIDATE_ANSWERS: [pooled.get(i // size) for i in range(len(prompts))],
            },
        )

    @hookimpl
    def post_step(self, ctx):
        rollout = ctx.rollout
        if rollout is None or CONTEXT_CORRECT not in rollout.columns:
            return
        answers = self._answers(rollout.columns)
        helped, copy, alone = [], [], []
        for text, answer, shown, role in zip(rollout.completions, answers, rollout.columns[CONTEXT_CORRECT], rollout.columns[ROLE_COLUMN]):
            if answer is None:  # a row without an answer is in no figure
                continue
            right = bool(self.is_correct(text, answer))
            if role == SOLVE:
                alone.append(right)
            elif any(shown):
                helped.append(right)
                copy.append(sum(shown) / len(shown))  # copying a shown candidate at random is right this often
        if helped:
            ctx.log("debate_correct_given_a_correct_candidate", sum(helped) / len(helped))
            ctx.log("copy_baseline", sum(copy) / len(copy))
        if alone:
            ctx.log("solve_correct", sum(alone) / len(alone))
