"""The CoVo reward: trajectories whose intermediate states keep pointing at their own answer are rewarded.

No reference answer is used. Per group (the completions of one prompt): read each final answer, cluster the
distinct ones, probe every answered trajectory after each of its steps with every distinct answer, turn the
probes' perplexities into consistency and volatility, aggregate them per answer, and reward the trajectories of
the answers that pass (see :mod:`stackrl_covo.formulas`).
"""

from __future__ import annotations

import re

import torch

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.answers import Extractor, groups_of, read_answers
from stackrl_covo.config import Aggregation, CoVoConfig, Curiosity, RewardMode, Scoring
from stackrl_covo.formulas import curiosity_bonus, group_rewards, ril, riv
from stackrl_covo.probing import ProbeTexts, plan_probes, probe_logprobs, read_plan
from stackrl_covo.steps import split_steps


# The authors' accuracy filter keeps a group when its mean reward is at least this (binary rewards: any reward).
FILTER_MIN_MEAN = 0.001


class CoVo(Plugin):
    """CoVo (Zhang et al., 2025, arXiv 2506.08745) on the reward hook."""

    Config = CoVoConfig
    activity = "completions had an answer it could score"

    def __init__(self, config=None):
        super().__init__(config)
        self._check_config()

    def _check_config(self) -> None:
        config = self.config
        if config.max_steps < 1:
            raise ConfigError(f"covo.max_steps must be at least 1, not {config.max_steps}")
        try:
            filled = config.probe_template.format(answer="\0")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"covo.probe_template {config.probe_template!r} is not a format string with only {{answer}}: {exc}"
            ) from None
        if "\0" not in filled:
            raise ConfigError(f"covo.probe_template {config.probe_template!r} must contain {{answer}}")
        if (config.answer_extractor is Extractor.regex) != (config.answer_regex is not None):
            raise ConfigError("covo.answer_regex is needed with covo.answer_extractor: regex, and only then")
        if config.answer_regex is not None:
            try:
                re.compile(config.answer_regex)
            except re.error as exc:
                raise ConfigError(f"covo.answer_regex {config.answer_regex!r} is not a valid regex: {exc}") from None

    @hookimpl
    def reward(self, ctx):
        config, rollout, tokenizer = self.config, ctx.rollout, ctx.tokenizer
        texts = tokenizer.batch_decode(rollout.completion_ids, skip_special_tokens=True)
        answers = read_answers(ctx, config, "covo", texts)
        size = rollout.group_size
        index, distinct = [], []
        for group in groups_of(answers, size, config.math_verify):
            index.extend(group.index)
            distinct.extend([group.distinct] * size)

        plans = self._plans(tokenizer, rollout, texts, index, distinct)
        logprobs = iter(probe_logprobs(self._score(ctx, plans), config.greedy_next_token) if plans else [])

        distances = [None] * len(rollout)
        bonus = torch.zeros(len(rollout), dtype=torch.float64)
        curiosities = []
        for row, plan in plans.items():
            distances[row], row_curiosity = read_plan(plan, [next(logprobs) for _ in plan.probes])
            if row_curiosity is not None:
                curiosities.append(row_curiosity)
                if plan.answers:  # a group with one answer has nothing to compare: no bonus either
                    bonus[row] = curiosity_bonus(row_curiosity, config.curiosity_threshold, config.curiosity_bonus)

        aggregate = riv if config.aggregation is Aggregation.riv else ril
        threshold = None
        if config.reward_mode is RewardMode.binary:
            threshold = config.riv_threshold if config.aggregation is Aggregation.riv else config.ril_threshold
        rewards, consistency, volatility = (torch.zeros(len(rollout), dtype=torch.float64) for _ in range(3))
        for start in range(0, len(rollout), size):
            rows = slice(start, start + size)
            rewards[rows], consistency[rows], volatility[rows] = group_rewards(
                index[rows], distances[rows], aggregate, threshold
            )

        if config.group_filter and ctx.training:
            unrewarded = rewards.view(-1, size).mean(dim=1) < FILTER_MIN_MEAN
            rollout.exclude_from_loss(unrewarded[rollout.group_index].nonzero().flatten().tolist())
            ctx.log("filtered_groups", unrewarded.double().mean().item())

        compared = [row for row, plan in plans.items() if plan.answers]
        ctx.log("answered", sum(a is not None for a in index) / len(rollout))
        ctx.log("distinct_answers", sum(len(distinct[s]) for s in range(0, len(rollout), size)) / rollout.num_groups)
        ctx.log("intrinsic", rewards.mean().item())
        if compared:
            ctx.log("consistency", consistency[compared].mean().item())
            ctx.log("volatility", volatility[compared].mean().item())
        if curiosities:
            ctx.log("curiosity", sum(curiosities) / len(curiosities))
            ctx.log("curiosity_bonus", bonus.mean().item())
        return rewards + bonus if config.curiosity is Curiosity.add else rewards

    def _plans(self, tokenizer, rollout, texts, index, distinct):
        """The probes of every answered trajectory: answer probes where its group has two answers or more."""
        config = self.config
        curiosity = config.curiosity is not Curiosity.off
        filler = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        plans, probe_texts = {}, ProbeTexts(tokenizer)
        for row, text in enumerate(texts):
            compared = distinct[row] if len(distinct[row]) >= 2 else []  # one answer: nothing to compare with
            if index[row] is not None and (compared or curiosity):
                plans[row] = plan_probes(
                    tokenizer,
                    probe_texts,
                    rollout.completion_ids[row],
                    text,
                    split_steps(text, config.max_steps),
                    compared,
                    config.probe_template,
                    curiosity=curiosity,
                    greedy=config.greedy_next_token,
                    filler=filler,
                )
        return plans

    def _score(self, ctx, plans):
        """The log-probs of every planned probe, in plan order, through the configured scoring path."""
        rows = list(plans)
        prompts = [ctx.rollout.prompt_ids[row] for row in rows]
        trajectories = [ctx.rollout.completion_ids[row] for row in rows]
        options = {"topk": 1 if self.config.greedy_next_token else None, "batch_size": self.config.batch_size}
        if self.config.scoring is Scoring.shared_prefix:
            return ctx.score_probes(prompts, trajectories, [plans[row].probes for row in rows], **options)
        pairs = [
            (prompt + trajectory[:branch], ids)
            for prompt, trajectory, row in zip(prompts, trajectories, rows)
            for branch, ids in plans[row].probes
        ]
        return ctx.score([p for p, _ in pairs], [ids for _, ids in pairs], **options)
