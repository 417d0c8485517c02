"""The DAPD loss term: both sources, both paths, on the rows that have a reference solution."""

from __future__ import annotations

from stackrl import ConfigError, hookimpl
from stackrl.blocks.teacher import SelfTeacherPlugin, privileged_rows
from stackrl_dapd.config import DapdConfig
from stackrl_dapd.objective import dapd_loss, dapd_terms, reference_ids


class Dapd(SelfTeacherPlugin):
    """Dual-Anchored Policy Distillation: six anchored forward KLs between matched-information views of the
    rollout and of the reference solution."""

    Config = DapdConfig
    activity = "completions were distilled on (those whose row has a reference solution)"

    @property
    def models(self) -> dict[str, str]:
        """The model each anchor is scored with (names ``ctx.score`` knows)."""
        base = "reference" if self.config.teacher == "reference" else f"{self.name}.initial"
        return {"snapshot": f"{self.name}.snapshot", "base": base}

    def check_run(self, run):
        run.check_template(self, "teacher_template", own=("reference",))
        if self.config.teacher == "reference":
            run.need_reference("dapd.teacher", "the fixed anchor is")
        if run.columns is not None and self.config.reference_column not in run.columns:
            raise ConfigError(f"dapd.reference_column: '{self.config.reference_column}' is not a column of "
                              f"data.source ({run.source}); its columns: {', '.join(run.columns)}")

    @hookimpl
    def train_begin(self, ctx):
        if ctx.step == 0:  # both copies are checkpointed: a resumed run gets them back
            ctx.update_snapshot(self.models["snapshot"], checkpoint=True)
            if self.config.teacher == "initial":
                ctx.update_snapshot(self.models["base"], checkpoint=True)

    @hookimpl
    def post_step(self, ctx):
        if ctx.step % self.config.snapshot_interval == 0:
            ctx.update_snapshot(self.models["snapshot"], checkpoint=True)

    @hookimpl
    def loss_term(self, ctx):
        config = self.config
        rows = privileged_rows(ctx.rollout, config.teacher_template, columns=(config.reference_column,))
        ctx.acted(len(rows), of=len(ctx.rollout), hint=f"no row had a reference solution ({config.reference_column})")
        if not rows:
            return None
        rollout = ctx.rollout.select(rows)
        references = reference_ids(ctx.tokenizer, rollout.columns[config.reference_column], ctx.eos_token_ids,
                                   config.max_reference_tokens)
        terms = dapd_terms(ctx, rollout, references, config, models=self.models, grad=ctx.training)
        for name, values in terms.items():
            ctx.log(f"kl_{name}", values.mean().item())
        return dapd_loss(terms, config)
