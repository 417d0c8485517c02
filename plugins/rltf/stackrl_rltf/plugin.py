"""RLTF, RL from text feedback: a failed first attempt gets feedback and a second attempt; the single-turn policy
learns from them through self-distillation (SD) and feedback modelling (FM).

In the advantage stage, each first attempt (a row of the rollout, sampled from the bare question) is judged by
``metric``; each failed one gets feedback (the rule critic's check of it, or the policy's own) and one second
attempt, sampled from ``retry_template`` (question, attempt, feedback) and judged too. The rollout itself is
trained by GRPO as usual. The loss term adds, on the rows that were retried:

- SD: the second attempt, put after the bare question the first attempt was trained on, weighted by its reward
  less the mean reward of the group's first attempts, on the tokens the bare-question policy gives a
  log-probability of at least ``min_logprob``, times ``sd_coef``;
- FM: the negative log-likelihood of the feedback after ``feedback_template`` (question, attempt), times
  ``fm_coef``.
"""

from __future__ import annotations

import torch

from stackrl import ConfigError, Plugin, hookimpl
from stackrl.blocks.roles import text_prompt
from stackrl.rewards import ROLE_COLUMN, SOLUTION_ROLES, reference_answers
from stackrl_rltf.config import RltfConfig
from stackrl_rltf.feedback import critic_feedback, second_attempt_advantages
from stackrl_rltf.objectives import feedback_nll_sum, self_distillation_sum

FEEDBACK = "rltf_feedback"  # column: the feedback on the row's failed first attempt (None: not retried)
SECOND = "rltf_second"  # column: the second attempt's text (None: not retried)
SECOND_IDS = "rltf_second_ids"  # column: its token ids, as sampled
SECOND_CORRECT = "rltf_second_correct"  # column: whether it is right (None: not retried)
SD_ADVANTAGE = "rltf_sd_advantage"  # column: r2 - mean(r1) of the group (None: not retried)


class Rltf(Plugin):
    Config = RltfConfig
    activity = "first attempts failed and were retried after feedback"

    def check_run(self, run):
        for key, own in (("feedback_template", ("attempt",)), ("retry_template", ("attempt", "feedback"))):
            run.check_template(self, key, own=own)
        if run.chat:
            raise ConfigError("rltf.retry_template: the second attempt's prompt extends the question's text; "
                              "set data.chat: false")

    def first_attempts(self, ctx) -> tuple[list, list]:
        """Each row's reference answer and first-attempt correctness (``None``: no answer, or a row whose role does
        not answer the question)."""
        rollout = ctx.rollout
        answers = reference_answers(rollout.columns, self.config.answer_column, plugin=self.name,
                                    purpose="tell failed first attempts by")
        roles = rollout.columns.get(ROLE_COLUMN)
        correct = [
            None if answer is None or (roles is not None and roles[i] not in SOLUTION_ROLES)
            else self.config.is_correct(text, answer)
            for i, (text, answer) in enumerate(zip(rollout.completions, answers))
        ]
        return answers, correct

    def feedback_on(self, ctx, rows: list[int]) -> dict[int, str]:
        """The feedback on each of the failed first attempts ``rows``; the critic gives none on an attempt it
        cannot read."""
        rollout, config = ctx.rollout, self.config
        if config.feedback == "critic":
            found = {i: critic_feedback(rollout.completions[i]) for i in rows}
            unread = [i for i, text in found.items() if text is None]
            if unread:
                ctx.warn("unreadable_attempts", len(unread))
            return {i: text for i, text in found.items() if text is not None}
        asked = [config.feedback_template.format(prompt=text_prompt(rollout.prompts[i], role="rltf feedback"),
                                                 attempt=rollout.completions[i]) for i in rows]
        return {i: reply.text for i, reply in zip(rows, ctx.generate(asked))}

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        if not ctx.training:
            return None
        rollout, config = ctx.rollout, self.config
        answers, first = self.first_attempts(ctx)
        failed = [i for i, right in enumerate(first) if right is False]
        feedback = self.feedback_on(ctx, failed)
        retried = list(feedback)
        seconds = ctx.generate([
            config.retry_template.format(prompt=text_prompt(rollout.prompts[i], role="rltf retry"),
                                         attempt=rollout.completions[i], feedback=feedback[i])
            for i in retried
        ])
        second_correct = {i: config.is_correct(g.text, answers[i]) for i, g in zip(retried, seconds)}
        advantage = second_attempt_advantages(first, second_correct, rollout.group_size)
        generated = dict(zip(retried, seconds))
        rows = range(len(rollout))
        rollout.columns[FEEDBACK] = [feedback.get(i) for i in rows]
        rollout.columns[SECOND] = [generated[i].text if i in generated else None for i in rows]
        rollout.columns[SECOND_IDS] = [list(generated[i].completion_ids) if i in generated else None for i in rows]
        rollout.columns[SECOND_CORRECT] = [second_correct.get(i) for i in rows]
        rollout.columns[SD_ADVANTAGE] = [advantage.get(i) for i in rows]
        judged = [right for right in first if right is not None]
        ctx.acted(len(retried), of=len(judged), hint=(
            f"no first attempt failed, or rltf.feedback {config.feedback!r} gave none on those that did (the critic "
            "reads only the built-in task's solution format)"))
        if judged:
            ctx.log("first_success", sum(judged) / len(judged))
        if retried:
            ctx.log("second_success", sum(second_correct.values()) / len(retried))
            ctx.log("sd_advantage", sum(advantage.values()) / len(retried))
        return None

    @hookimpl
    def loss_term(self, ctx):
        columns, config = ctx.rollout.columns, self.config
        if not ctx.training or SD_ADVANTAGE not in columns:
            return None
        rows = [i for i, value in enumerate(columns[SD_ADVANTAGE]) if value is not None]
        if not rows:
            return None
        tokens = ctx.completion_mask.sum().clamp(min=1)  # as TRL's policy loss counts this micro-batch's tokens
        term = 0.0
        if config.distils:
            term = term + config.sd_coef * self._self_distillation(ctx, rows) / tokens
        if config.models_feedback:
            term = term + config.fm_coef * self._feedback_modelling(ctx, rows) / tokens
        return term

    def _self_distillation(self, ctx, rows: list[int]) -> torch.Tensor:
        """The SD sum over the second attempts of ``rows``, after the prompts their first attempts were trained on."""
        rollout, columns = ctx.rollout, ctx.rollout.columns
        scores = ctx.score([rollout.prompt_ids[i] for i in rows], [columns[SECOND_IDS][i] for i in rows],
                           grad=True, temperature=ctx.sampling_temperature)
        advantages = torch.tensor([columns[SD_ADVANTAGE][i] for i in rows], dtype=scores.logprobs.dtype,
                                  device=scores.logprobs.device)
        total, kept = self_distillation_sum(scores.logprobs, scores.mask, advantages, self.config.min_logprob)
        ctx.log("sd_kept", (kept.sum() / scores.mask.sum().clamp(min=1)).item())
        return total

    def _feedback_modelling(self, ctx, rows: list[int]) -> torch.Tensor:
        """The FM sum: the feedback on the first attempts of ``rows``, with the end of sequence, after the prompt it
        answers."""
        rollout, config, tokenizer = ctx.rollout, self.config, ctx.tokenizer
        eos = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
        contexts = [config.feedback_template.format(prompt=rollout.prompts[i], attempt=rollout.completions[i])
                    for i in rows]
        targets = [tokenizer(rollout.columns[FEEDBACK][i], add_special_tokens=False)["input_ids"] + eos for i in rows]
        scores = ctx.score(contexts, targets, grad=True)
        total = feedback_nll_sum(scores.logprobs, scores.mask)
        ctx.log("feedback_nll", (total.detach() / scores.mask.sum().clamp(min=1)).item())
        return total
