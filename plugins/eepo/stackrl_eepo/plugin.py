"""EEPO: each group's second half is sampled from a copy of the policy that has just unlearned the first half."""

from __future__ import annotations

import stackrl
from stackrl import PluginError
from stackrl_eepo.config import EepoConfig, check

STAGE_COLUMN = "eepo_stage"  # per row: 1 where sampled from the unlearned copy, 0 from the live policy


class Eepo(stackrl.Plugin):
    """Sample-then-forget rollouts.

    The live policy samples the first half of every group. A scratch copy of it then takes the unlearning step on
    those completions (``ctx.scratch_update``: the live weights and the optimizer are untouched), and the copy
    samples the second half, pushed away from the modes the first half found. Nothing needs restoring: the copy is
    thrown away at the next rollout. The whole group is then trained as GRPO trains it.
    """

    Config = EepoConfig
    activity = "completions were sampled by the copy after its unlearning step"
    SNAPSHOT = "eepo"

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)
        self.recent_entropy: list[float] = []  # the last entropy_window steps' estimates, oldest first

    def check_run(self, run):
        if run.group_size % 2:
            raise stackrl.ConfigError(
                f"eepo: trainer.num_generations must be even to split each group in two halves, not {run.group_size}"
            )

    @stackrl.hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:
            return None
        size = ctx.group_size
        if size % 2:
            raise PluginError(
                f"plugin 'eepo' at step {ctx.step}: trainer.num_generations must be even to split each group in two "
                f"halves, not {size}"
            )
        rows = range(len(prompts))
        first_rows = [i for i in rows if i % size < size // 2]
        second_rows = [i for i in rows if i % size >= size // 2]
        first = ctx.generate([prompts[i] for i in first_rows])
        contexts = [g.prompt_ids for g in first]
        completions = [g.completion_ids for g in first]
        temperature = ctx.sampling_temperature  # the step lowers the distribution the halves are sampled from
        unlearn = self.config.entropy_threshold is None or self._low_entropy(ctx, contexts, completions)
        if unlearn:
            losses = ctx.scratch_update(
                self.SNAPSHOT, contexts, completions, objective=self.config.objective,
                learning_rate=self.config.learning_rate, steps=self.config.steps, temperature=temperature,
            )
            ctx.log("unlearning_loss", losses[0])
        ctx.log("unlearned", float(unlearn))
        ctx.acted(len(second_rows) if unlearn else 0, of=len(prompts),
                  hint="the first half's entropy estimate stayed at or above eepo.entropy_threshold")
        second = ctx.generate([prompts[i] for i in second_rows], model=self.SNAPSHOT if unlearn else "policy")
        completion_ids, stage = [None] * len(prompts), [0] * len(prompts)
        for i, g in zip(first_rows, first):
            completion_ids[i] = g.completion_ids
        for i, g in zip(second_rows, second):
            completion_ids[i], stage[i] = g.completion_ids, int(unlearn)
        return stackrl.Samples(completion_ids=completion_ids, columns={STAGE_COLUMN: stage})

    def _low_entropy(self, ctx, contexts, completions) -> bool:
        """Whether the mean of the last ``entropy_window`` steps' entropy estimates, this one's included, lies below
        the threshold. Each estimate is the mean over the first half's tokens of -log p of the sampled token (its
        expectation is the policy's entropy; no vocabulary-wide pass), logged as ``entropy_estimate``, the mean as
        ``entropy_mean``."""
        scores = ctx.score(contexts, completions, temperature=ctx.sampling_temperature)
        estimate = float(-(scores.logprobs * scores.mask).sum() / scores.mask.sum().clamp(min=1))
        self.recent_entropy = [*self.recent_entropy, estimate][-self.config.entropy_window :]
        mean = sum(self.recent_entropy) / len(self.recent_entropy)
        ctx.log("entropy_estimate", estimate)
        ctx.log("entropy_mean", mean)
        return mean < self.config.entropy_threshold

    @stackrl.hookimpl
    def state_dict(self):
        return {"recent_entropy": list(self.recent_entropy)}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.recent_entropy = list(state["recent_entropy"])
