"""B-STaR as a plugin: each batch is sampled at the temperature the balance score chose last, and keeps for the
policy loss only the rows above the threshold the balance score chooses on it."""

from __future__ import annotations

import math

import torch

from stackrl import Plugin, Samples, hookimpl
from stackrl.plugin import training_only
from stackrl.rewards import ROLE_COLUMN, SOLUTION_ROLES, reference_answers

from stackrl_bstar.balance import Candidate, best_temperature, best_threshold
from stackrl_bstar.config import BStarConfig


class BStar(Plugin):
    """Balanced self-taught reasoning, online: a probe of a few of the last batch's problems at every temperature of
    the grid picks the temperature whose samples reach the highest balance score (each at its best threshold); the
    next batches are sampled at it, and each batch keeps in the loss the rows scoring above the threshold with the
    highest balance score on that batch. The chosen temperature is plugin state."""

    Config = BStarConfig
    activity = "completions scored above the reward threshold the balance score chose and stayed in the loss"

    def __init__(self, config=None):
        super().__init__(config)
        self.temperature: float | None = self.config.initial_temperature  # None: the run's, until the first probe
        self.batches_seen = 0  # the pool's batch count at the last probe's check: one check per generation batch
        self.batches_since_probe = 0
        self.last_probe: dict | None = None  # the last probe's candidates by temperature (not state: for monitors)

    def needs_rewards(self):
        return {"reward": self.config.reward} if self.config.reward is not None else {}

    def check_run(self, run):
        run.need_column("bstar.answer_column", self.config.answer_column, "tell right answers for the balance score")

    # sample: the chosen temperature
    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        temperature = ctx.sampling_temperature if self.temperature is None else self.temperature
        generations = ctx.generate(prompts, temperature=temperature)
        ctx.log("temperature", temperature)
        return Samples(completion_ids=[g.completion_ids for g in generations],
                       prompt_ids=[g.prompt_ids for g in generations])

    # advantage: the chosen threshold
    def _queries(self, completions, answers, size, extra=None):
        rows = range(len(completions))
        correct = [self.config.is_correct(completions[i], answers[i]) for i in rows]
        scores = [float(correct[i]) + (0.0 if extra is None else self.config.reward_scale * extra[i]) for i in rows]
        candidates = [Candidate(completions[i], correct[i], scores[i]) for i in rows]
        return [candidates[start:start + size] for start in range(0, len(candidates), size)]

    def _scored_groups(self, rollout) -> list[int]:
        """The groups the balance score reads: those with a reference answer whose rows solve the question (a row
        without an answer, or of another role, is left as GRPO has it)."""
        answers = reference_answers(rollout.columns, self.config.answer_column, plugin="bstar",
                                    purpose="tell right answers for the balance score")
        roles = rollout.columns.get(ROLE_COLUMN)
        size = rollout.group_size
        return [group for group in range(rollout.num_groups)
                if answers[group * size] is not None and (roles is None or roles[group * size] in SOLUTION_ROLES)]

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        if not ctx.training:
            return advantages
        rollout, size = ctx.rollout, ctx.rollout.group_size
        rows = [row for group in self._scored_groups(rollout) for row in range(group * size, (group + 1) * size)]
        answers = rollout.columns[self.config.answer_column]
        extra = None
        if self.config.reward is not None:
            component = torch.nan_to_num(rollout.rewards[self.config.reward].float(), nan=0.0)
            extra = [float(component[row]) for row in rows]
        queries = self._queries([rollout.completions[row] for row in rows], [answers[row] for row in rows], size,
                                extra)
        threshold, balance = best_threshold(queries, self.config.n_star)
        flat = [candidate for candidates in queries for candidate in candidates]
        dropped = [row for row, candidate in zip(rows, flat) if not candidate.score > threshold]
        if self.config.select and dropped:
            rollout.exclude_from_loss(dropped)
        kept = len(flat) - (len(dropped) if self.config.select else 0)
        ctx.acted(kept, of=len(rollout), hint="bstar.select is false" if not self.config.select else None)
        ctx.log("balance", balance)
        ctx.log("threshold", threshold if math.isfinite(threshold) else -1.0)
        return advantages

    # post-step: the probe that chooses the next temperature
    @hookimpl
    def post_step(self, ctx):
        if ctx.rollout is None or (ctx.pool is not None and ctx.pool.batches == self.batches_seen):
            return
        if ctx.pool is not None:
            self.batches_seen = ctx.pool.batches
        self.batches_since_probe += 1
        if self.batches_since_probe < self.config.every:
            return
        self.batches_since_probe = 0
        rollout, size = ctx.rollout, ctx.rollout.group_size
        firsts = [group * size for group in self._scored_groups(rollout)][: self.config.probe_problems]
        if not firsts:
            return
        answers = rollout.columns[self.config.answer_column]
        samples = self.config.probe_samples
        prompts = [rollout.prompts[row] for row in firsts for _ in range(samples)]
        references = [answers[row] for row in firsts for _ in range(samples)]
        probed = {}
        for temperature in self.config.temperatures:
            texts = [g.text for g in ctx.generate(prompts, temperature=float(temperature))]
            probed[float(temperature)] = self._queries(texts, references, samples)
        chosen, found = best_temperature(probed, self.config.n_star)
        self.temperature = chosen
        self.last_probe = probed
        ctx.log("probe_balance", found[chosen][1])
        ctx.log("chosen_temperature", chosen)

    @hookimpl
    def state_dict(self):
        return {"temperature": self.temperature, "batches_seen": self.batches_seen,
                "batches_since_probe": self.batches_since_probe}

    @hookimpl
    def load_state_dict(self, state):
        self.temperature = state["temperature"]
        self.batches_seen = state["batches_seen"]
        self.batches_since_probe = state["batches_since_probe"]
