"""eva's creator on stackrl's prompt pool: after each batch the regret of every prompt drawn is read off its group's
rewards; every ``every_steps`` steps the prompts with the highest regret (the authors' importance-weighted draw, or
the top ones) are evolved by the policy into new prompts, which join the pool and take ``evolved_share`` of the
draws. The solver is the run's own RL (GRPO here; the authors' online variant uses RLOO)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Optional

import torch

from stackrl import ConfigError, Plugin, PluginError, hookimpl
from stackrl.blocks.selfinstruct import REJECTIONS, SelfInstructSettings
from stackrl.blocks.selfplay import common_ending
from stackrl.tasks.posing import REQUEST

from stackrl_eva.creator import LABELS, UNVERIFIED, evolve_request, first_problem, keep_variants
from stackrl_eva.regret import REGRETS, SELECTIONS, choose_parents, group_regret, mix_weight


@dataclass
class EvaConfig:
    section: ClassVar[str] = "eva"
    # The signal: the reward component whose spread within a group is the prompt's regret (a verifier here; the
    # authors' reward model), and which spread: gap (max - min, the authors' later runs), maxmean (max - mean),
    # var (variance).
    reward: str = "exact_match"
    regret: str = "gap"
    # The creator's round: after every this many optimizer steps, the prompts drawn since the last round are
    # ranked by their latest regret and select_frac of them (rounded up) become parents (the authors: 0.25).
    every_steps: int = 4
    select_frac: float = 0.25
    select: str = "weighted"  # weighted: the authors' importance-weighted draw; top: the highest regrets
    # Evolving: variants requests per parent (the authors: 4 evolutions), each a pose request listing the parent
    # alone, sampled with `sampling`; the first problem of each reply is a variant.
    variants: int = 4
    sampling: Dict[str, Any] = field(
        default_factory=lambda: {"do_sample": True, "temperature": 0.88, "top_p": 1.0, "max_new_tokens": 512})
    problem_column: str = "question"  # the dataset column of a prompt's problem; variants get it
    system_prompt: Optional[str] = None  # before the request (a chat's system message)
    request: str = REQUEST  # the words before the listed parent (the pose request the built-in model learnt)
    # The self-instruction rules a variant must pass (stackrl.blocks.selfinstruct.review): word counts, and the
    # ROUGE-L above which it repeats a problem of the pool (0.99: repeats only; the authors filter none).
    min_words: int = 4
    max_words: int = 150
    max_similarity: float = 0.99
    # The verifier of a variant: none (label-free rows: a reward that needs no answer rates them, the authors'
    # reward model) or arithmetic (the built-in task's answer read from the question; a variant not of the task's
    # form is dropped).
    label: str = "none"
    # The share of the draws that go to evolved prompts once any exist (the authors' next set: 0.8 evolved, 0.2 the
    # earlier prompts); null: every row weighs the same.
    evolved_share: Optional[float] = 0.8
    seed: int = 0  # the weighted draw's generator

    def __post_init__(self):
        if not self.reward:
            raise ConfigError("eva.reward: name the reward component whose group spread is the regret")
        if self.regret not in REGRETS:
            raise ConfigError(f"eva.regret must be one of {', '.join(REGRETS)}, not '{self.regret}'")
        if self.select not in SELECTIONS:
            raise ConfigError(f"eva.select must be one of {', '.join(SELECTIONS)}, not '{self.select}'")
        if self.every_steps < 1:
            raise ConfigError(f"eva.every_steps must be at least 1, not {self.every_steps}")
        if not 0.0 < self.select_frac <= 1.0:
            raise ConfigError(f"eva.select_frac must lie in (0, 1], not {self.select_frac}")
        if self.variants < 1:
            raise ConfigError(f"eva.variants must be at least 1, not {self.variants}")
        if self.label not in LABELS:
            raise ConfigError(f"eva.label must be one of {', '.join(LABELS)}, not '{self.label}'")
        if self.evolved_share is not None and not 0.0 < self.evolved_share < 1.0:
            raise ConfigError(f"eva.evolved_share must lie strictly between 0 and 1 (or be null), not "
                              f"{self.evolved_share}")
        if not 1 <= self.min_words <= self.max_words:
            raise ConfigError("eva.min_words and eva.max_words must satisfy 1 <= min <= max")
        if not 0.0 <= self.max_similarity <= 1.0:
            raise ConfigError(f"eva.max_similarity must lie in [0, 1], not {self.max_similarity}")


def _generate(ctx, prompts, **sampling):
    return ctx.generate(prompts, **sampling)


class Eva(Plugin):
    """eva (Ye et al., 2024, arXiv 2411.00062): the creator's estimate, sample and evolve on the prompt pool."""

    Config = EvaConfig
    activity = "prompts of the last batch had a regret to rank (their group was scored)"

    def __init__(self, config=None):
        super().__init__(config)
        config = self.config
        self.rules = SelfInstructSettings(min_words=config.min_words, max_words=config.max_words,
                                          max_similarity=config.max_similarity)
        self.label = LABELS[config.label]
        self.generate = _generate  # writes the variants; a test may script it
        self.regrets: dict[int, float] = {}  # row -> its latest regret, rows drawn since the last round
        self.parents: dict[int, int] = {}  # evolved row -> the row it was evolved from
        self.batches_seen = 0
        self.counts = (0, 0)  # the last batch's rows with a regret, of its rows
        self.chosen: list[int] = []  # the last round's parents (for monitors; not state)
        self._generator = torch.Generator().manual_seed(config.seed)

    def needs_rewards(self) -> dict[str, str]:
        return {"reward": self.config.reward}

    @hookimpl
    def post_step(self, ctx):
        if ctx.pool is None:
            raise PluginError("eva needs the prompt pool, which this run lacks (its training data is not a "
                              "map-style dataset)")
        if ctx.rollout is not None and ctx.pool.batches != self.batches_seen:
            self.batches_seen = ctx.pool.batches
            self._estimate(ctx)
        scored, groups = self.counts
        ctx.acted(scored, of=groups, hint="eva.reward: the groups' rewards were all unscored (nan)")
        if ctx.step % self.config.every_steps == 0:
            self._evolve(ctx)

    def _estimate(self, ctx) -> None:
        """Each group's regret, kept as its row's latest."""
        config, rollout = self.config, ctx.rollout
        if config.reward not in rollout.rewards:
            raise PluginError(f"eva.reward: no reward component '{config.reward}' at step {ctx.step}; the run "
                              f"computes {', '.join(rollout.rewards) or 'none'}")
        regrets = group_regret(rollout.rewards[config.reward], rollout.group_size, config.regret)
        for row, regret in zip(ctx.pool.last_batch, regrets):
            if not math.isnan(regret):
                self.regrets[row] = regret
        known = [r for r in regrets if not math.isnan(r)]
        self.counts = (len(known), len(regrets))
        if known:
            ctx.log("regret", sum(known) / len(known))
            ctx.log("informative", sum(r > 0 for r in known) / len(known))

    def _evolve(self, ctx) -> None:
        """A round: parents chosen from the regrets since the last round, each evolved into variants, the kept
        ones added to the pool and weighed."""
        config, pool = self.config, ctx.pool
        parents = choose_parents(self.regrets, config.select_frac, config.select, self._generator)
        ctx.log("parents", len(parents))
        if parents:
            ctx.log("parent_regret", sum(self.regrets[p] for p in parents) / len(parents))
        self.regrets = {}
        self.chosen = parents
        texts = {p: pool.row(p).get(config.problem_column) for p in parents}
        missing = [p for p, text in texts.items() if not isinstance(text, str)]
        if missing:
            raise PluginError(f"eva.problem_column: row {missing[0]} of the pool has no '{config.problem_column}' "
                              f"to evolve at step {ctx.step}; its columns: {', '.join(sorted(pool.row(missing[0])))}")
        asked = [p for p in parents for _ in range(config.variants)]
        requests = [evolve_request(texts[p].strip(), pool.chat, config.system_prompt, config.request) for p in asked]
        replies = [g.text for g in self.generate(ctx, requests, **config.sampling)] if requests else []
        candidates = [(p, problem) for p, text in zip(asked, replies)
                      if (problem := first_problem(text, pool.chat)) is not None]
        known = [str(pool.row(i).get(config.problem_column)) for i in pool.active_rows()
                 if pool.row(i).get(config.problem_column) is not None]
        kept, rejected = keep_variants(candidates, known, self.rules, self.label)
        ending = common_ending([texts[p] for p in parents])
        rows = [pool.format_row({config.problem_column: problem + ending, **columns}) for _, problem, columns in kept]
        ids = pool.add_rows(rows) if rows else []
        self.parents.update({i: parent for i, (parent, _, _) in zip(ids, kept)})
        ctx.log("written", len(candidates))
        ctx.log("added", len(ids))
        for reason in (*REJECTIONS, UNVERIFIED):
            ctx.log(f"rejected/{reason}", rejected[reason])
        self._weigh(pool)

    def _weigh(self, pool) -> None:
        """The evolved rows together take ``evolved_share`` of the draws against the other active rows."""
        if self.config.evolved_share is None:
            return
        active = pool.active_rows()
        evolved = [row for row in active if row in self.parents]
        weight = mix_weight(len(evolved), len(active) - len(evolved), self.config.evolved_share)
        changed = {row: weight for row in evolved if pool.stats(row).weight != weight}
        if changed:
            pool.set_row_weights(changed)

    @hookimpl
    def state_dict(self):
        return {"regrets": {str(k): v for k, v in self.regrets.items()},
                "parents": {str(k): v for k, v in self.parents.items()},
                "batches_seen": self.batches_seen, "counts": list(self.counts),
                "generator": self._generator.get_state()}

    @hookimpl
    def load_state_dict(self, state):
        self.regrets = {int(k): float(v) for k, v in state["regrets"].items()}
        self.parents = {int(k): int(v) for k, v in state["parents"].items()}
        self.batches_seen = state["batches_seen"]
        self.counts = tuple(state["counts"])
        self._generator.set_state(state["generator"])
