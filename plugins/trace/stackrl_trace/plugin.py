"""The TRACE plugin: critical spans found once per rollout, distilled from the privileged self-teacher, GRPO elsewhere."""

from __future__ import annotations

import re

from stackrl import Plugin, PluginError, Rollout, hookimpl
from stackrl.blocks.teacher import privileged_rows, teacher_prompts
from stackrl.blocks.turns import NewlineTokens, line_spans
from stackrl_trace.config import TraceConfig, check, teacher_template
from stackrl_trace.loss import kl_weight, scale_span_advantages, span_divergence, span_loss
from stackrl_trace.spans import (
    DEFAULT_LABELS,
    ERROR,
    KEY,
    RowSpans,
    capped_positions,
    numbered,
    parse_annotation,
    reached_spans_line,
)

ROUTED_KINDS = {"key_fkl": (KEY,), "error_rkl": (ERROR,), "both": (KEY, ERROR)}


class Trace(Plugin):
    """Token-routed self-distillation: KL to the privileged self-teacher on critical spans only, annealed away."""

    Config = TraceConfig
    activity = "completions had a span to distil on"

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)
        self._pattern = re.compile(self.config.span_pattern) if self.config.spans == "rule" else None
        self._is_newline: NewlineTokens | None = None

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward}  # every rollout's spans depend on its correctness

    @property
    def column(self) -> str:
        """The rollout column the spans ride in from the advantage stage to the loss stage."""
        return f"{self.name}_spans"

    @property
    def teacher_model(self) -> str:
        """The name ``score`` knows the teacher by: the periodically synced copy is this plugin's own snapshot."""
        return self.name if self.config.teacher == "snapshot" else self.config.teacher

    # -- finding spans --------------------------------------------------------------------------------------------

    def correct_rows(self, rollout: Rollout, step: int) -> list[bool]:
        correct = rollout.passing(
            self.config.correct_reward, self.config.correct_threshold, key="trace.correct_reward", step=step
        )
        return correct.tolist()

    def find_spans(self, ctx) -> list[RowSpans | None]:
        """Each row's capped spans (``None`` for a row with none): key spans of correct rollouts, error spans of
        incorrect ones, for the kinds the route uses. A row without an answer (neither correct nor incorrect, and
        without the teacher's context) gets none."""
        rollout = ctx.rollout
        kinds = [KEY if ok else ERROR for ok in self.correct_rows(rollout, ctx.step)]
        templates = [teacher_template(self.config)]
        if self.config.spans == "annotator":
            templates.append(self.config.annotator_template)
        rows = [i for i in privileged_rows(rollout, *templates) if kinds[i] in ROUTED_KINDS[self.config.route]]
        self._is_newline = self._is_newline or NewlineTokens(ctx.tokenizer)
        bounds = [line_spans(rollout.completion_ids[i], self._is_newline) for i in rows]
        texts = [
            ctx.tokenizer.batch_decode([rollout.completion_ids[i][a:b] for a, b in rows_bounds], skip_special_tokens=True)
            for i, rows_bounds in zip(rows, bounds)
        ]
        found: list[RowSpans | None] = [None] * len(rollout)
        for i, row_bounds, (ranges, label) in zip(rows, bounds, self._annotations(ctx, rows, kinds, texts)):
            budget = int(self.config.max_coverage * len(rollout.completion_ids[i]))
            positions = capped_positions(ranges, row_bounds, budget)
            if positions:
                found[i] = RowSpans(kinds[i], positions, label or DEFAULT_LABELS[kinds[i]])
        return found

    def _annotations(self, ctx, rows: list[int], kinds: list[str], texts: list[list[str]]):
        """``(segment ranges in priority order, label or None)`` for each of ``rows``, from the configured source."""
        source = self.config.spans
        if source == "rule":
            return [([(k, k) for k, text in enumerate(seg) if self._pattern.search(text)], None) for seg in texts]
        if source == "column":
            return [self._from_column(ctx, i, len(seg)) for i, seg in zip(rows, texts)]
        return self._from_annotator(ctx, rows, kinds, texts)

    def _from_column(self, ctx, row: int, num_segments: int):
        columns = ctx.rollout.columns
        if self.config.spans_column not in columns:
            raise PluginError(
                f"trace.spans_column: no column '{self.config.spans_column}' in the rollout at step {ctx.step}; "
                f"columns: {', '.join(sorted(columns)) or 'none'}"
            )
        value = columns[self.config.spans_column][row]
        if isinstance(value, str):
            return parse_annotation(value, num_segments)
        numbers = [k for k in value or () if isinstance(k, int) and 1 <= k <= num_segments]
        return [(k - 1, k - 1) for k in numbers], None

    def _from_annotator(self, ctx, rows: list[int], kinds: list[str], texts: list[list[str]]):
        if not rows:
            return []
        rollout = ctx.rollout
        config = self.config
        requests = {KEY: config.key_request, ERROR: config.error_request}
        columns = {name: [values[i] for i in rows] for name, values in rollout.columns.items()}
        columns["segments"] = [numbered(seg) for seg in texts]
        columns["request"] = [requests[kinds[i]] for i in rows]
        prompts = teacher_prompts(
            [rollout.prompts[i] for i in rows], columns, config.annotator_template, where="trace.annotator_template"
        )
        answers = ctx.generate(prompts, do_sample=False, max_new_tokens=config.annotator_max_new_tokens)
        unanswered = sum(not reached_spans_line(answer.text) for answer in answers)
        if unanswered:
            # Those rows get no span, so no KL: with a thinking annotator out of budget, the method is off.
            ctx.warn("no_spans_line", unanswered)
        return [parse_annotation(answer.text, len(seg)) for answer, seg in zip(answers, texts)]

    # -- hooks ----------------------------------------------------------------------------------------------------

    @hookimpl
    def train_begin(self, ctx):
        if self.config.teacher == "snapshot" and kl_weight(ctx.step, self.config) > 0:
            ctx.update_snapshot(self.name)

    @hookimpl
    def post_step(self, ctx):
        # ctx.step is the step just completed: the next loss runs at this step number.
        lam = kl_weight(ctx.step, self.config)
        ctx.log("lambda", lam)
        if self.config.teacher == "snapshot" and lam > 0 and ctx.step % self.config.sync_every == 0:
            ctx.update_snapshot(self.name, decay=0.0)

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        lam = kl_weight(ctx.step, self.config)
        if not ctx.training or lam == 0:
            ctx.acted(0, of=0)  # the schedule has the KL off: nothing to act on
            return None
        spans = self.find_spans(ctx)
        ctx.rollout.columns[self.column] = spans
        rule = f" (trace.span_pattern {self.config.span_pattern!r})" if self.config.spans == "rule" else ""
        ctx.acted(len(spans) - spans.count(None), of=len(spans), hint=(
            f"trace.spans '{self.config.spans}'{rule} found none in the completions trace.route "
            f"'{self.config.route}' distils (by trace.correct_reward)"))
        mask = ctx.rollout.completion_mask()
        span_tokens = sum(len(s.positions) for s in spans if s is not None)
        ctx.log("coverage", span_tokens / max(1, int(mask.sum())))
        ctx.log("rows_with_spans", sum(s is not None for s in spans) / len(spans))
        return scale_span_advantages(advantages, spans, mask.size(1), lam, self.config.w0)

    @hookimpl
    def loss_term(self, ctx):
        lam = kl_weight(ctx.step, self.config)
        spans = ctx.rollout.columns.get(self.column)
        if not ctx.training or lam == 0 or spans is None:
            return None  # after the schedule: no teacher forward at all
        rows = [i for i, s in enumerate(spans) if s is not None]
        if not rows:
            return None
        chosen = [spans[i] for i in rows]
        distilled = ctx.rollout.select(rows)
        divergence = span_divergence(ctx, distilled, chosen, self.config, teacher=self.teacher_model, grad=True)
        lengths = [len(ids) for ids in distilled.completion_ids]
        return lam * span_loss(divergence, chosen, lengths, batch_rows=len(ctx.rollout))
