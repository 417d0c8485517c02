"""Self-ReSET: a safety guard flags the policy's own unsafe reasoning; the flagged prefix becomes a new prompt, and
continuations from it are rewarded by the guard's verdict.

Paper: "Self-ReSET: ... recover from their own safety error trajectories" (arXiv abstract, catalogue line 001:37).
Code followed: github.com/Ing1024/Self-ReSET at 3d2c4c6 (slime/slime/rollout/partialrollout.py, rm_hub/safety_rm.py).
"""

from __future__ import annotations

import stackrl
from stackrl.aux_rules import RULES
from stackrl.blocks.roles import split_steps
from stackrl_selfreset.config import SelfresetConfig
from stackrl_selfreset.guard import RULE, first_flagged, guard_request, read_verdict, safety_reward
from stackrl_selfreset.resets import reset_rows, reset_text


class Selfreset(stackrl.Plugin):
    """A reward, the guard's verdict on each completion (1 safe, 0 not); after each step, each flagged completion
    of a group whose verdicts spread gives the pool a reset row: its prompt followed by its lines up to the first
    one the guard flags, drawn once, with a higher weight than a fresh problem."""

    Config = SelfresetConfig
    activity = "completions had a verdict of the guard"

    def __init__(self, config=None):
        super().__init__(config)
        self.pending: set[int] = set()  # reset rows in the pool not yet drawn
        self.batches_seen = 0  # the pool's batch count at the last update: one update per generation batch
        self._judged = None  # (prompts, completions, verdicts, flagged lines) of the last training rollout

    def check_run(self, run):
        if self.config.max_resets > 0:
            run.need_plain_text("selfreset.max_resets", "reset prompts continue the question as text (0: no resets)")
        if self.config.guard and self.config.guard not in run.aux_models:
            raise stackrl.ConfigError(
                f"selfreset.guard: '{self.config.guard}' is not declared under aux_models")

    def ask(self, ctx, requests: list[str]) -> list[str | None]:
        """The guard's verdict on each request."""
        if not requests:
            return []
        if self.config.guard:
            replies = [None if g.failed else g.text for g in ctx.generate(
                requests, model=self.config.guard, do_sample=False, max_new_tokens=self.config.max_new_tokens)]
        else:
            replies = RULES[RULE](requests)
        return [read_verdict(reply) for reply in replies]

    def judge(self, ctx, prompts: list, completions: list[str], scan: bool = True) -> tuple[list, list]:
        """Each completion's verdict, and, with ``scan``, for those not safe the flagged line (the first line whose
        prefix the guard does not call safe, ``None`` if none is)."""
        template = self.config.template
        verdicts = self.ask(ctx, [guard_request(p, c, template) for p, c in zip(prompts, completions)])
        scans = {i: split_steps(completions[i]) for i, v in enumerate(verdicts) if scan and v not in (None, "safe")}
        requests, owners = [], []
        for i, steps in scans.items():
            for k in range(len(steps)):
                requests.append(guard_request(prompts[i], "".join(steps[: k + 1]), template))
                owners.append(i)
        stream = self.ask(ctx, requests)
        flagged: list[int | None] = [None] * len(completions)
        for i in scans:
            flagged[i] = first_flagged([v for v, owner in zip(stream, owners) if owner == i])
        return verdicts, flagged

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        prompts = [p if isinstance(p, str) else str(p[-1]["content"]) for p in rollout.prompts]
        verdicts, flagged = self.judge(ctx, prompts, list(rollout.completions), scan=ctx.training)
        if ctx.training:
            self._judged = (list(rollout.prompts), list(rollout.completions), verdicts, flagged)
        scores = [safety_reward(v) for v in verdicts]
        ctx.acted(sum(s is not None for s in scores), of=len(scores),
                  hint="selfreset.guard gave no verdict: check its replies say 'safe' or 'unsafe'")
        ctx.log("unsafe", sum(s == 0.0 for s in scores) / max(1, len(scores)))
        return scores

    @stackrl.hookimpl
    def train_begin(self, ctx):
        if ctx.pool is None:
            raise stackrl.PluginError(
                "selfreset needs the prompt pool, which this run lacks (its training data is not a map-style dataset)")

    @stackrl.hookimpl
    def post_step(self, ctx):
        # With steps_per_generation > 1 several optimizer steps share one rollout: it is counted once.
        rollout = ctx.rollout
        if rollout is None or ctx.pool.batches == self.batches_seen:
            return
        self.batches_seen = ctx.pool.batches
        if self._judged is None or self._judged[:2] != (list(rollout.prompts), list(rollout.completions)):
            return
        _, _, verdicts, flagged = self._judged
        size, drawn = rollout.group_size, ctx.pool.last_batch
        spent = [g for g, row in enumerate(drawn) if row in self.pending]
        if spent:  # a reset row is trained on once, as the authors' buffer pops it
            ids = sorted({drawn[g] for g in spent})
            ctx.pool.retire(ids)
            self.pending.difference_update(ids)
        lines = [len(split_steps(c)) for c in rollout.completions]
        chosen = reset_rows(verdicts, flagged, lines, size, set(spent), self.config.spread_only)
        chosen = chosen[: max(0, self.config.max_resets - len(self.pending))]
        rows = [{**ctx.pool.row(drawn[i // size]),
                 "prompt": reset_text(rollout.prompts[i], rollout.completions[i], flagged[i], self.config.cue)}
                for i in chosen]
        if rows:
            ids = ctx.pool.add_rows(rows)
            ctx.pool.set_row_weights({row: self.config.reset_weight for row in ids})
            self.pending.update(ids)
        ctx.log("resets_added", len(rows))
        ctx.log("resets_pending", len(self.pending))
        ctx.log("resets_drawn", len(spent))

    @stackrl.hookimpl
    def state_dict(self):
        return {"pending": sorted(self.pending), "batches_seen": self.batches_seen}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.pending = set(state["pending"])
        self.batches_seen = state["batches_seen"]
