"""EvoEnv: the policy writes environments (programs that sample instances and compute their answers), the sandbox
runs them, a filter keeps those with solve-verify asymmetry, and the policy trains on the kept ones' instances.

A batch holds proposer groups (completions of the one request row, each an environment program: its last fenced
block, else the whole reply) and solver groups (instances of environments kept at earlier steps, drawn from the
prompt pool). In the reward stage each proposed program runs twice in the sandbox with the same seed (the step) and
is screened (``stackrl_evoenv.screening``: runs, deterministic, checkable); the survivors' instances are solved
``solver_samples`` times each by the policy, and an environment is kept when the pass rate lies in the band. A kept
environment earns 1 (a rejected one ``stage_credit`` times the share of the stages it passed), and its instances
join the pool after the step, each with the environment's answer; a solver's completion earns 1 when its answer is
that answer.
"""

from __future__ import annotations

from typing import Optional

from stackrl import Plugin, PluginError, hookimpl
from stackrl.answers import equivalent, extractor_of
from stackrl.blocks.sandbox import Sandbox, check_isolation, measured_once, program_of
from stackrl.blocks.selfplay import SelfPlayPool, labelled_rewards

from stackrl_evoenv.config import EvoEnvConfig
from stackrl_evoenv.screening import STAGES, Screening, in_band, pass_rate, proposer_reward, request_text, screen_runs

ANSWER_COLUMN = "evoenv_answer"  # a solver row: the reference its environment computed


class EvoEnv(Plugin):
    """EvoEnv (Shi et al., 2026, arXiv 2605.14392) on the sandbox, the pool and the reward hook."""

    Config = EvoEnvConfig
    activity = "completions it scored (an environment screened, or a solution to a kept environment's instance)"

    def __init__(self, config=None):
        super().__init__(config)
        config = self.config
        self.selfplay = SelfPlayPool("evoenv", config.problem_column, config.proposer_share, config.train_on_dataset)
        self.prompts = None  # the solver's prompt format, learnt from the pool at train_begin
        # Filled in the reward stage, emptied by the post_step that follows (no checkpoint holds any).
        self.pending: list = []  # the kept environments' instances
        self.last: list[Screening] = []  # the last reward stage's screenings, to inspect

    def check_run(self, run):
        check_isolation(run.sandbox)

    @hookimpl
    def train_begin(self, ctx):
        pool = self._pool(ctx)
        topic = self.config.topic if self.config.topic is not None else request_text()
        self.prompts = self.selfplay.begin(pool, [{"role": "user", "content": topic}] if pool.chat else topic)

    @hookimpl
    def post_step(self, ctx):
        added = self.selfplay.after_step(self._pool(ctx), self.prompts, [i.question for i in self.pending],
                                         [{ANSWER_COLUMN: i.answer} for i in self.pending])
        ctx.log("added", len(added))
        self.pending = []

    def _pool(self, ctx):
        if ctx.pool is None:
            raise PluginError("evoenv needs the prompt pool, which this run lacks (its training data is not a "
                              "map-style dataset)")
        return ctx.pool

    # -- the reward stage ----------------------------------------------------------------------------------------

    def screen(self, ctx, programs: list[str], read) -> list[Screening]:
        """Each program screened: two sandboxed runs with the step as the seed (made on the main process and shared,
        so every process sees the same outputs even of a non-deterministic program), then the solver's tries at the
        survivors' instances in one ``ctx.generate`` call, then the band."""
        config = self.config
        if not programs:
            return []
        argv = (str(ctx.step), str(config.instances))
        results = measured_once(lambda: Sandbox.of(ctx).run_many(
            [p for p in programs for _ in range(2)], argv=argv, timeout_s=config.timeout_s, cpu_s=config.cpu_s),
            what="evoenv")
        screenings = [screen_runs(results[2 * n], results[2 * n + 1], config.instances, config.check_known,
                                  config.math_verify) for n in range(len(programs))]
        survivors = [s for s in screenings if s.failed is None]
        if survivors and self.prompts is None:
            raise PluginError("evoenv: a request row was drawn before train_begin learnt the run's prompt format")
        tries = [(s, i) for s in survivors for i in s.instances for _ in range(config.solver_samples)]
        replies = ctx.generate([self.prompts(i.question) for _, i in tries], **config.solver_sampling) if tries else []
        for s in survivors:
            right = [read(r.text) for (owner, _), r in zip(tries, replies) if owner is s]
            answers = [i.answer for i in s.instances for _ in range(config.solver_samples)]
            s.pass_rate = pass_rate([a is not None and equivalent(a, t, config.math_verify)
                                     for a, t in zip(right, answers)])
            if not in_band(s.pass_rate, config.min_pass, config.max_pass):
                s.failed = "band"
                s.why = f"pass rate {s.pass_rate:.3f} outside [{config.min_pass}, {config.max_pass}]"
        return screenings

    @hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        read = extractor_of(config, "evoenv", config.answer_extractor or rollout.answer_format)
        proposer = self.selfplay.proposer_rows(rollout)
        rewards: list[Optional[float]] = [None] * len(rollout)
        scored = labelled_rewards(ctx, rewards, proposer, ANSWER_COLUMN, read, config.math_verify)
        rows = [i for i, p in enumerate(proposer) if p]
        screenings = self.screen(ctx, [program_of(rollout.completions[i]) for i in rows], read)
        for i, s in zip(rows, screenings):
            rewards[i] = proposer_reward(s, config.stage_credit)
        scored += len(rows)
        if ctx.training:
            self.pending.extend(i for s in screenings if s.accepted for i in s.instances)
        self.last = screenings
        if rows:
            ctx.log("proposer/accepted", sum(s.accepted for s in screenings) / len(rows))
            for stage in STAGES:
                ctx.log(f"proposer/failed_{stage}", sum(s.failed == stage for s in screenings) / len(rows))
            rated = [s.pass_rate for s in screenings if s.pass_rate is not None]
            if rated:
                ctx.log("proposer/pass_rate", sum(rated) / len(rated))
        ctx.log("proposer_share", len(rows) / len(rollout))
        ctx.acted(scored, of=len(rollout), hint=None if scored else
                  "evoenv.proposer_share: no request row or kept instance was drawn")
        return rewards
