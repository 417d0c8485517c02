"""ReMix: each group samples only part of its rows fresh and fills the rest with the same prompt's rows kept from
the last few rollout batches, whose advantages the host weights by the truncated importance ratio.

Paper: Squeeze the Soaked Sponge: Efficient Off-policy Reinforcement Finetuning for Large Language Model (Liang,
Tang, Ma, Liu, Zheng, Hu, Bai, Hao; arXiv 2507.06892). Code: AnitaLeungxx/ReMix-Off-Policy-RFT@95f7396 holds the
evaluation only; the training rules here follow the paper (see the README's table).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import stackrl
from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings
from stackrl.plugin import training_only
from stackrl_remix.mixing import age, fresh_count, pick_stale, usable

# The rollout column holding each row's age: 0 for a row sampled now, else how many batches ago it was sampled.
AGE = "remix_age"


@dataclass
class RemixConfig:
    # The share of each group the policy samples now (rounded up, at least one row); the rest is filled from the
    # same prompt's stored rows. The paper's off-policy proportion p is 1 - fresh_share; 0.5 is ours.
    fresh_share: float = 0.5
    # A stored row may be replayed up to this many rollout batches after the one that sampled it (the paper's
    # window of recent policies); older rows are evicted. 2 is ours.
    max_age: int = 2
    # Policy reincarnation: from this generation step (ctx.step) on, every row is sampled fresh and the library is
    # emptied: plain on-policy GRPO for the rest of the run. 0: never (the paper switches midway).
    on_policy_from: int = 0
    # The store of fresh rows with their behaviour log-probs (docs/hooks.md, the experience library).
    experience: ExperienceSettings = field(default_factory=lambda: ExperienceSettings(capacity=1024))

    def __post_init__(self):
        if not 0.0 < self.fresh_share <= 1.0:
            raise stackrl.ConfigError(f"remix.fresh_share: must lie in (0, 1], not {self.fresh_share}")
        if self.max_age < 1:
            raise stackrl.ConfigError(f"remix.max_age: must be at least 1, not {self.max_age}")
        if self.on_policy_from < 0:
            raise stackrl.ConfigError(f"remix.on_policy_from: must be non-negative, not {self.on_policy_from}")


class Remix(stackrl.Plugin):
    """Mix-policy GRPO: a group's first ``fresh_share`` rows are sampled now, the rest are the newest rows of the
    same prompt sampled at most ``max_age`` batches ago, handed over with their behaviour log-probs so the host
    weights their advantages by ``min(c, pi_now / pi_behaviour)``; fresh rows are stored with their log-probs,
    scored before the optimizer moves. From ``on_policy_from`` on, plain on-policy GRPO."""

    Config = RemixConfig
    activity = "rows were replayed from an earlier batch instead of sampled now"

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, "remix")
        self.batches = 0  # rollout batches generated for training so far: a record's `step` is its batch's index
        self._fresh: list[int] | None = None  # this batch's fresh rows, stored in the advantage stage
        self.known: dict[str, list[int]] = {}  # a prompt (prompt_key) with stored rows -> its token ids

    def check_run(self, run):
        notes = []
        if fresh_count(run.group_size, self.config.fresh_share) == run.group_size:
            notes.append(f"remix.fresh_share: {self.config.fresh_share} of a group of {run.group_size} rounds up "
                         "to the whole group: no row is ever replayed")
        if self.config.on_policy_from:
            notes.append(run.past_end("remix.on_policy_from", self.config.on_policy_from + 1,
                                      "rollouts are sampled on-policy"))
        return [note for note in notes if note]

    def reincarnated(self, step: int) -> bool:
        return bool(self.config.on_policy_from) and step >= self.config.on_policy_from

    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        self._fresh = None
        if self.reincarnated(ctx.step):
            self.library, self.known = ExperienceLibrary(self.config.experience, "remix"), {}
            ctx.acted(0, of=len(prompts), hint="remix.on_policy_from has passed: sampling on-policy")
            return None
        batch, size = self.batches, ctx.group_size
        self.batches += 1
        for record in list(self.library):
            if not usable(record, batch, self.config.max_age):
                self.library.remove(record.key)
        self.known = {k: ids for k, ids in self.known.items() if self.library.of_prompt(ids)}
        groups, n_fresh = len(prompts) // size, fresh_count(size, self.config.fresh_share)
        keys = [prompt_key(prompts[g * size]) for g in range(groups)]
        picked = [pick_stale(self.library.of_prompt(self.known[k]), batch, self.config.max_age, size - n_fresh)
                  if k in self.known else [] for k in keys]
        # One call: each group's fresh rows, and as many more as its stored rows fall short of filling it.
        sampled = iter(ctx.generate([prompts[g * size] for g in range(groups) for _ in range(size - len(picked[g]))]))
        completions, behaviour, ages, fresh = [], [], [], []
        for g in range(groups):
            new = [next(sampled) for _ in range(size - len(picked[g]))]
            self.known[keys[g]] = list(new[0].prompt_ids)
            rows = [(list(s.completion_ids), None, 0) for s in new]
            rows += [(list(r.completion_ids), list(r.behaviour_logprobs), age(r, batch)) for r in picked[g]]
            for ids, logprobs, old in rows:
                if old == 0:
                    fresh.append(len(completions))
                completions.append(ids)
                behaviour.append(logprobs)
                ages.append(old)
        self._fresh = fresh
        replayed = len(prompts) - len(fresh)
        ctx.log("fresh_share", len(fresh) / max(1, len(prompts)))
        ctx.log("library", len(self.library))
        ctx.acted(replayed, of=len(prompts),
                  hint="no prompt came back within remix.max_age batches with rows stored: a smaller data pool, or "
                       "a larger max_age, lets them")
        return stackrl.Samples(completion_ids=completions, behaviour_logprobs=behaviour, columns={AGE: ages})

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        """Store this batch's fresh rows with their log-probs under the policy that sampled them, scored here,
        before the optimizer moves, at the sampling temperature (what the host divides the new ratio by)."""
        fresh, self._fresh = self._fresh, None
        rollout = ctx.rollout
        if not fresh or AGE not in rollout.columns:
            return None
        scores = ctx.score([rollout.prompt_ids[r] for r in fresh], [rollout.completion_ids[r] for r in fresh],
                          temperature=ctx.sampling_temperature)
        batch = self.batches - 1
        for j, row in enumerate(fresh):
            n = len(rollout.completion_ids[row])
            self.library.add(Experience.of_row(rollout, row, batch,
                                               behaviour_logprobs=scores.logprobs[j, :n].tolist()))
        return None

    @stackrl.hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict(), "batches": self.batches, "known": self.known}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.library.load_state_dict(state["library"])
        self.batches = int(state["batches"])
        self.known = {k: list(ids) for k, ids in state["known"].items()}


def prompt_key(prompt) -> str:
    """A prompt as the batch gives it (text, chat messages or token ids), as a key: the library finds a prompt's
    rows by its token ids, known once the policy has sampled it."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
