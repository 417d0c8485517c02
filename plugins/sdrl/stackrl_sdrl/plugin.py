"""SDRL: some groups solve their question alone, the others answer it again after a debate context.

A debate group's first ``candidates`` rows answer its bare question; ``context_size`` of those candidates,
distinct final answers first, are shown after the question, and the group's other rows reply to that context.
Every row is a solution: the built-in outcome rewards score them, and each group's candidates and replies are
normalised apart (``estimate_advantages``), so the first turn and the debate turn of one prompt are optimised in
one update. With ``train_candidates: false`` the candidates are sampled apart with ``ctx.generate``, untrained,
and all of a debate group's rows reply.
"""

from __future__ import annotations

from stackrl import ConfigError, Plugin, Samples, hookimpl
from stackrl.answers import extractor_of
from stackrl.blocks.roles import assign_roles, first_turns, rows_of_groups, text_prompt
from stackrl.blocks.turns import Segment, segment_advantages
from stackrl.rewards import OUTCOME_REWARDS, RETRY, ROLE_COLUMN, SOLVE, reference_answers
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
        roles = rows_of_groups(group_roles, size)
        generations = {}  # row -> its Generation
        if config.train_candidates:
            if config.candidates > size - 2:
                raise ConfigError(
                    f"sdrl.candidates: with sdrl.train_candidates a debate group's {size} rows (trainer.num_generations) "
                    f"hold its candidates and at least two replies; at most {size - 2}, not {config.candidates}"
                )
            roles = [SOLVE if role == RETRY and i % size < config.candidates else role for i, role in enumerate(roles)]
            solving = [i for i, role in enumerate(roles) if role == SOLVE]
            generations = dict(zip(solving, ctx.generate([prompts[i] for i in solving])))
            pools = {g: [generations[g * size + k] for k in range(config.candidates)]
                     for g, role in enumerate(group_roles) if role == RETRY}
        else:
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
        rest = [i for i in range(len(prompts)) if i not in generations]  # replies, and untrained runs' solve rows
        generations.update(zip(rest, ctx.generate([contexts.get(i // size, prompts[i]) for i in rest])))
        rows = [generations[i] for i in range(len(prompts))]
        replying = [role == RETRY for role in roles]
        return Samples(
            completion_ids=[g.completion_ids for g in rows],
            prompt_ids=[g.prompt_ids for g in rows],
            columns={
                ROLE_COLUMN: roles,
                CONTEXT_CORRECT: [shown.get(i // size) if replying[i] else None for i in range(len(prompts))],
                CANDIDATE_ANSWERS: [pooled.get(i // size) if replying[i] else None for i in range(len(prompts))],
            },
        )

    @hookimpl
    def estimate_advantages(self, ctx):
        """GRPO's mean and std within each group, a debate group's candidates and replies apart."""
        rollout = ctx.rollout
        if not self.config.train_candidates or ROLE_COLUMN not in rollout.columns:
            return None
        segments = [[Segment(role, 0, 0, len(ids), "")] for role, ids in zip(rollout.columns[ROLE_COLUMN], rollout.completion_ids)]
        values = [[value] for value in ctx.total_reward.tolist()]
        return segment_advantages(values, segments, rollout.group_size, rollout.completion_mask().size(1))

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
