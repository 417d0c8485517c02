"""RLoop: RL explores from a start; the start, fine-tuned on the successes found, begins the next iteration."""

from __future__ import annotations

import stackrl
from stackrl_rloop.config import RloopConfig, check

START = "rloop_start"  # the snapshot of the current iteration's starting weights


class Rloop(stackrl.Plugin):
    """Iterative policy re-initialisation.

    Each iteration runs ``iteration_steps`` GRPO steps from its start, keeping every distinct successful trajectory
    of the hard problems it meets (groups whose pass rate is at most ``max_pass_rate``). At its last step the live
    weights go back to the start, are fine-tuned on that buffer (rejection-sampling fine-tuning, with a fresh
    optimizer), and the result is the next iteration's start; RL resumes from it with a fresh optimizer and
    schedule. The start is a checkpointed snapshot and the buffer is plugin state, so a resumed run continues
    exactly.
    """

    Config = RloopConfig
    activity = "completions were new successes of hard groups, kept for the fine-tuning phase"

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)
        self.buffer: list[tuple[list[int], list[int]]] = []  # (prompt ids, completion ids) of this iteration
        self.iteration = 0

    def needs_rewards(self) -> dict[str, str]:
        return {"reward": self.config.reward}

    def check_run(self, run):
        steps = self.config.iteration_steps
        return [run.past_end("rloop.iteration_steps", steps, "the first fine-tuning on the successes comes at the end")]

    @stackrl.hookimpl
    def train_begin(self, ctx):
        if ctx.step == 0:
            ctx.update_snapshot(START, checkpoint=True)

    @stackrl.hookimpl
    def post_step(self, ctx):
        self._collect(ctx)
        if ctx.step % self.config.iteration_steps:
            return
        self.iteration += 1
        ctx.log("buffer", len(self.buffer))
        if not self.buffer:  # nothing to fine-tune on: the start itself begins the next iteration
            ctx.warn("empty_buffer")
        ctx.supervised_phase(
            "rft", [p for p, _ in self.buffer], [c for _, c in self.buffer], restore=START,
            learning_rate=self.config.rft_learning_rate, epochs=self.config.rft_epochs,
            batch_size=self.config.rft_batch_size,
        )
        ctx.update_snapshot(START, checkpoint=True)
        self.buffer = []

    def _collect(self, ctx) -> None:
        """Keep the new distinct successes of the rollout's hard groups."""
        rollout = ctx.rollout
        passed = rollout.passing(self.config.reward, self.config.success_threshold, key="rloop.reward", step=ctx.step)
        size = rollout.group_size
        seen = set(map(_key, self.buffer))
        kept = 0
        for group in range(rollout.num_groups):
            rows = range(group * size, (group + 1) * size)
            if sum(bool(passed[i]) for i in rows) > self.config.max_pass_rate * size:
                continue
            for i in rows:
                pair = (list(rollout.prompt_ids[i]), list(rollout.completion_ids[i]))
                if passed[i] and _key(pair) not in seen:
                    seen.add(_key(pair))
                    self.buffer.append(pair)
                    kept += 1
        ctx.log("kept", kept)
        ctx.acted(kept, of=len(rollout), hint=f"no group at or below rloop.max_pass_rate {self.config.max_pass_rate} "
                  f"had a success (rloop.reward {self.config.reward!r} at rloop.success_threshold)")

    @stackrl.hookimpl
    def state_dict(self):
        return {"buffer": [list(pair) for pair in self.buffer], "iteration": self.iteration}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.buffer = [(list(p), list(c)) for p, c in state["buffer"]]
        self.iteration = state["iteration"]


def _key(pair) -> tuple:
    return tuple(pair[0]), tuple(pair[1])
