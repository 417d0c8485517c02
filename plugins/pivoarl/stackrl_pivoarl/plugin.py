"""PivoARL: each group's failed first attempts are retried from their pivotal step, the correct prefix kept, and the
failure's credit is split at the pivot.

A group of ``G`` rows holds ``G - R`` first attempts at its question and ``R`` retry rows (``retry_share``). Each
failed first attempt gets its pivot: the first wrong line, found by the task's checker (``oracle``) or by the
policy's own structured reflection (``self``). The retry rows continue the failed attempts that have one, in turn,
from the question followed by the lines before the pivot (kept verbatim); they are trained on that prompt, so their
gradient falls on the suffix they wrote. Where no attempt failed with a pivot, the retry rows are fresh attempts.

In the advantage stage the group's GRPO advantages (first attempts and retries compared together) become per-token:
a retried failure's prefix takes the prefix credit (:mod:`stackrl_pivoarl.credit`), its pivot and suffix keep its
own, negative advantage.
"""

from __future__ import annotations

import torch

from stackrl import ConfigError, Plugin, Samples, hookimpl
from stackrl.blocks.roles import reset_prompt, rows_of_groups, split_steps, text_prompt
from stackrl.blocks.turns import NewlineTokens, Trajectory, generate_turn, line_spans
from stackrl.rewards import RESET, ROLE_COLUMN, SOLVE, reference_answers
from stackrl.tasks import JUDGE_MARKER, judge_prompt
from stackrl_pivoarl.config import PivoarlConfig
from stackrl_pivoarl.credit import pivotal_credit, reflection_returns
from stackrl_pivoarl.retries import assign, oracle_pivot, reflected_pivot, retry_slots

PIVOT_COLUMN = "pivoarl_pivot"  # a failed first attempt's pivotal line (retried or not), a retry's: its source's; -1
RETRY_OF_COLUMN = "pivoarl_retry_of"  # a retry row: the row of its group it continues (0-based in the group); -1
PREFIX_COLUMN = "pivoarl_prefix"  # a retry row: the prefix it kept; "" otherwise
REFLECTION_COLUMN = "pivoarl_reflection"  # a failed attempt's trained reflection: its token span; None otherwise
ATTEMPT, REFLECTION = "attempt", "reflection"  # the segments of a failed attempt's row with a trained reflection


class Pivoarl(Plugin):
    Config = PivoarlConfig
    activity = "failed first attempts were retried from their pivotal step"

    def __init__(self, config=None):
        super().__init__(config)
        self._is_newline: NewlineTokens | None = None

    def needs_rewards(self):
        return {"metric": self.config.metric}

    def check_run(self, run):
        if run.chat:
            raise ConfigError("pivoarl.pivot: a retry continues the question's text with the kept prefix; "
                              "set data.chat: false")
        if run.group_size < 2:
            raise ConfigError(f"pivoarl.retry_share: a group needs a first attempt and a retry row; "
                              f"trainer.num_generations is {run.group_size}")
        return []

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures plain solving
            return None
        config, size = self.config, ctx.group_size
        groups = len(prompts) // size
        slots = retry_slots(size, config.retry_share)
        tries = size - slots
        answers = reference_answers(ctx.rollout_columns, config.answer_column, plugin=self.name,
                                    purpose="tell failed first attempts by")
        first = ctx.generate([prompts[g * size] for g in range(groups) for _ in range(tries)])
        steps = [split_steps(a.text) for a in first]
        answer_of = [answers[(i // tries) * size] for i in range(len(first))]  # each first attempt's reference
        failed = [i for i, a in enumerate(first)
                  if answer_of[i] is not None and not config.is_correct(a.text, answer_of[i])]
        reflected = {}  # a failed attempt's row with its trained reflection: (completion ids, loss mask, span)
        if config.pivot == "self" and config.reflection_return:
            pivots, reflected = self._reflected(first, steps, failed, ctx)
        else:
            pivots = self._pivots(prompts, first, steps, failed, tries, size, ctx)
        sources = [assign([pivots.get(g * tries + j) for j in range(tries)], slots) for g in range(groups)]
        again = []  # the retry rows' prompts: question + kept prefix, or the question for a fresh attempt
        prefixes = []
        for g in range(groups):
            for j in sources[g]:
                if j is None:
                    again.append(prompts[g * size])
                    prefixes.append("")
                    continue
                i = g * tries + j
                prefix = reset_prompt("", steps[i], pivots[i])
                again.append(text_prompt(prompts[g * size], role="pivoarl retry") + prefix)
                prefixes.append(prefix)
        second = ctx.generate(again)
        rows, roles, pivot_col, retry_of, prefix_col = [], [], [], [], []
        completions, masks, spans = [], [], []
        for g in range(groups):
            for j in range(tries):
                i = g * tries + j
                rows.append(first[i])
                ids, mask, span = reflected.get(i, (first[i].completion_ids, None, None))
                completions.append(ids)
                masks.append(mask or [1] * len(ids))
                spans.append(span)
                roles.append(SOLVE)
                pivot_col.append(pivots.get(g * tries + j, -1))
                retry_of.append(-1)
                prefix_col.append("")
            for s, j in enumerate(sources[g]):
                rows.append(second[g * slots + s])
                completions.append(second[g * slots + s].completion_ids)
                masks.append([1] * len(completions[-1]))
                spans.append(None)
                roles.append(SOLVE if j is None else RESET)
                pivot_col.append(-1 if j is None else pivots[g * tries + j])
                retry_of.append(-1 if j is None else j)
                prefix_col.append(prefixes[g * slots + s])
        retried = {g * tries + j for g in range(groups) for j in sources[g] if j is not None}
        ctx.log("failed", len(failed) / len(first))
        if failed:
            ctx.log("pivots_found", len(pivots) / len(failed))
        if retried:
            ctx.log("kept_lines", sum(pivots[i] for i in retried) / len(retried))
        ctx.log("retry_rows", sum(r == RESET for r in roles) / len(roles))
        ctx.acted(len(retried), of=len(failed),
                  hint=f"no failed attempt had a pivot found (pivoarl.pivot {config.pivot!r})")
        columns = {ROLE_COLUMN: roles, PIVOT_COLUMN: pivot_col, RETRY_OF_COLUMN: retry_of, PREFIX_COLUMN: prefix_col}
        if reflected:
            columns[REFLECTION_COLUMN] = spans
        return Samples(
            completion_ids=completions,
            prompt_ids=[g.prompt_ids for g in rows],  # a retry's: question + prefix, so its suffix alone trains
            columns=columns,
            loss_mask=masks if reflected else None,  # the judge marker injected before a reflection is not trained
        )

    def _reflected(self, first, steps, failed, ctx):
        """Structured reflection that is trained: each failed attempt is followed by the judge marker and a sampled
        reflection from those exact tokens; its pivot is the line the reflection's check stops at. Returns the pivots
        and, by attempt, the packed row: completion ids, loss mask, the reflection's token span."""
        marker = ctx.tokenizer("\n" + JUDGE_MARKER + "\n", add_special_tokens=False)["input_ids"]
        rows = []
        for i in failed:
            row = Trajectory(first[i].prompt_ids)
            row.add(ATTEMPT, first[i].completion_ids, first[i].text, ctx.eos_token_ids)
            row.inject(marker)
            rows.append(row)
        replies = generate_turn(rows, REFLECTION, ctx) if rows else []
        pivots, packed = {}, {}
        for i, row, reply in zip(failed, rows, replies):
            ids, mask, segments = row.packed()
            packed[i] = (ids, mask, (segments[-1].start, segments[-1].end))
            pivot = reflected_pivot(reply.text, steps[i])
            if pivot is not None:
                pivots[i] = pivot
        return pivots, packed

    def _pivots(self, prompts, first, steps, failed, tries, size, ctx) -> dict[int, int]:
        """The pivotal line of each failed first attempt that has one, by the attempt's index in ``first``."""
        if self.config.pivot == "oracle":
            found = {i: oracle_pivot(steps[i]) for i in failed}
        else:  # the policy reflects on each failure, greedily, in the judge format
            asked = [judge_prompt(text_prompt(prompts[(i // tries) * size], role="pivoarl reflection"), first[i].text)
                     for i in failed]
            replies = ctx.generate(asked, do_sample=False) if asked else []
            found = {i: reflected_pivot(r.text, steps[i]) for i, r in zip(failed, replies)}
        return {i: k for i, k in found.items() if k is not None}

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        rollout = ctx.rollout
        if RETRY_OF_COLUMN not in rollout.columns:  # another plugin generated: nothing of ours to credit
            return None
        size = rollout.group_size
        retry_of = [-1 if j < 0 else (i // size) * size + j for i, j in enumerate(rollout.columns[RETRY_OF_COLUMN])]
        pivots = [k if role == SOLVE else -1
                  for k, role in zip(rollout.columns[PIVOT_COLUMN], rollout.columns[ROLE_COLUMN])]
        pivots = [k if k >= 0 and i in retry_of else -1 for i, k in enumerate(pivots)]  # retried failures only
        self._is_newline = self._is_newline or NewlineTokens(ctx.tokenizer)
        spans = [line_spans(ids, self._is_newline) if k >= 0 else [] for ids, k in zip(rollout.completion_ids, pivots)]
        mask = rollout.completion_mask()
        out, changed = pivotal_credit(advantages, mask, spans, pivots, retry_of, self.config.prefix_credit)
        ctx.log("prefix_tokens", changed / max(int(mask.sum()), 1))
        if REFLECTION_COLUMN in rollout.columns:
            reflections = rollout.columns[REFLECTION_COLUMN]
            success = (rollout.rewards[self.config.metric] >= 1).tolist()
            returns, values = reflection_returns(reflections, retry_of, success, size)
            for row, value in values.items():
                start, end = reflections[row]
                out[row, start:end] = value
            if returns:
                ctx.log("reflection_return", sum(returns.values()) / len(returns))
        return out

    @hookimpl
    def post_step(self, ctx):
        """How the first attempts and the retries fared."""
        rollout = ctx.rollout
        if rollout is None or RETRY_OF_COLUMN not in rollout.columns:
            return
        rewards = rollout.rewards[self.config.metric]
        retry = torch.tensor([j >= 0 for j in rollout.columns[RETRY_OF_COLUMN]])
        first = torch.tensor([role == SOLVE for role in rollout.columns[ROLE_COLUMN]]) & ~retry
        ctx.log("first_success", float((rewards[first] >= 1).float().mean()))
        if retry.any():
            ctx.log("retry_success", float((rewards[retry] >= 1).float().mean()))
