"""RLER: reinforcement learning with ensembled rewards. Several reward estimators (the policy's own group, other
models answering the same prompt: auxiliary models by name, a snapshot of the policy) vote in one answer space;
each completion's reward interpolates between the ensemble's label and its share of the ensemble's vote, and a
group whose estimators disagree more than the ensemble is confident is kept out of the loss.

Paper: "Diagnosing and Mitigating System Bias in Self-Rewarding RL" (Tan, Yuan et al., 2025, arXiv 2510.08977).
Code followed: none public (README.md says what was searched).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

import stackrl
from stackrl.answers import AnswerSettings, extractor_of
from stackrl_rler.bias import correlation
from stackrl_rler.ensemble import INTERPOLATIONS, Ensembled, ensemble_reward

POLICY = "policy"  # the estimator that is the rollout's own group (the plain self-reward)
SNAPSHOT = "snapshot"  # the estimator that is a copy of the policy, refreshed every snapshot_every steps
ABSENT = ("error", "skip")


@dataclass
class RlerConfig(AnswerSettings):
    # Answers (inherited): answer_extractor (the run's answer format), answer_regex, math_verify.
    section: ClassVar[str] = "rler"
    # The reward estimators, each a name of the model= name space: `policy` (the group's own completions, the
    # self-reward), `snapshot` (a copy of the policy this plugin keeps), `reference`, or an aux model's name
    # (aux_models:). The paper ensembles several models; the CPU recipe uses arith-tiny, arith-skills and a snapshot.
    estimators: list = field(default_factory=lambda: [POLICY, SNAPSHOT])
    # Each estimator's weight in the ensemble's distribution (1 where absent): the paper weighs models equally.
    weights: dict = field(default_factory=dict)
    # Answers per prompt from each estimator other than the policy, sampled at `temperature` (greedy: 0). An aux
    # model's reply to one request is reused within a step (docs/hooks.md), so its answers are greedy in effect.
    samples: int = 1
    temperature: float = 0.0
    max_new_tokens: int | None = None  # None: trainer.max_completion_length
    # Steps between copies of the policy into the snapshot estimator (taken at the start; 0: never refreshed).
    snapshot_every: int = 8
    # How the reward reads the ensemble: adaptive (c * hard + (1 - c) * soft, c the ensemble's confidence), hard
    # (1 for the ensemble's label) or soft (the ensemble's share of the row's answer).
    interpolation: str = "adaptive"
    # Disagreement-aware selection: a group trains only where confidence - disagreement >= margin.
    select: bool = True
    margin: float = 0.0
    # An estimator naming a model the run lacks: refused (error), or left out with a note and a warning (skip).
    absent: str = "error"

    def __post_init__(self):
        super().__post_init__()
        if not self.estimators or len(set(self.estimators)) != len(self.estimators):
            raise stackrl.ConfigError(f"rler.estimators: must name distinct models, not {self.estimators}")
        if not all(isinstance(n, str) and n for n in self.estimators):
            raise stackrl.ConfigError(f"rler.estimators: must be model names, not {self.estimators}")
        unknown = sorted(set(self.weights) - set(self.estimators))
        if unknown:
            raise stackrl.ConfigError(f"rler.weights: {', '.join(unknown)} is not among rler.estimators")
        if any(not isinstance(w, (int, float)) or w <= 0 for w in self.weights.values()):
            raise stackrl.ConfigError(f"rler.weights: must be positive, not {self.weights}")
        if self.samples < 1:
            raise stackrl.ConfigError(f"rler.samples: must be at least 1, not {self.samples}")
        if self.temperature < 0:
            raise stackrl.ConfigError(f"rler.temperature: must be non-negative, not {self.temperature}")
        if self.snapshot_every < 0:
            raise stackrl.ConfigError(f"rler.snapshot_every: must be non-negative, not {self.snapshot_every}")
        if self.interpolation not in INTERPOLATIONS:
            raise stackrl.ConfigError(
                f"rler.interpolation: must be one of {', '.join(INTERPOLATIONS)}, not '{self.interpolation}'")
        if not -1.0 <= self.margin <= 1.0:
            raise stackrl.ConfigError(f"rler.margin: must lie in [-1, 1], not {self.margin}")
        if self.absent not in ABSENT:
            raise stackrl.ConfigError(f"rler.absent: must be one of {', '.join(ABSENT)}, not '{self.absent}'")


class Rler(stackrl.Plugin):
    """The reward hook: an ensembled, label-free reward, its pseudo-labels declared to the host's truth monitor,
    and the disagreement-aware selection of groups."""

    Config = RlerConfig
    activity = "completions had an answer and a group kept by the disagreement-aware selection"

    def __init__(self, config=None):
        super().__init__(config)
        self.active: list[str] = list(self.config.estimators)  # those of this run (absent: skip leaves some out)
        self.last: list[Ensembled] = []  # the last rollout's groups, for the benchmark's monitor
        self.last_votes: list[dict] = []  # and their votes: {"rows": the policy's answers, "votes": by estimator}
        self.snapshot_taken = False

    def check_run(self, run):
        known = {POLICY, SNAPSHOT, *run.aux_models} | ({"reference"} if run.reference else set())
        missing = [name for name in self.config.estimators if name not in known]
        if missing and self.config.absent == "error":
            raise stackrl.ConfigError(
                f"rler.estimators: {', '.join(missing)} names no model of this run (policy, snapshot, "
                f"{'reference, ' if run.reference else ''}aux_models: {', '.join(run.aux_models) or 'none'})")
        return [f"rler.estimators: {', '.join(missing)} left out (no such model in this run)"] if missing else None

    def _resolve(self, ctx) -> None:
        """The estimators of this run: with absent: skip, those naming no model of it are left out."""
        if self.config.absent == "skip":
            known = {POLICY, SNAPSHOT, "reference", *ctx.aux_model_names}
            self.active = [name for name in self.config.estimators if name in known]

    @stackrl.hookimpl
    def train_begin(self, ctx):
        self._resolve(ctx)
        self._take_snapshot(ctx)

    def _take_snapshot(self, ctx) -> None:
        if SNAPSHOT in self.active:
            ctx.update_snapshot(self.name)
            self.snapshot_taken = True

    @stackrl.hookimpl
    def post_step(self, ctx):
        every = self.config.snapshot_every
        if every and ctx.step % every == 0:
            self._take_snapshot(ctx)

    def votes(self, ctx, prompts: list, extract) -> dict[str, list[list]]:
        """Each estimator's answers per group (the policy's are its group's and come from the rollout)."""
        config, out = self.config, {}
        sampling = {"do_sample": False} if config.temperature == 0 else {"temperature": config.temperature}
        if config.max_new_tokens is not None:
            sampling["max_new_tokens"] = config.max_new_tokens
        asked = [p for p in prompts for _ in range(config.samples)]
        for name in self.active:
            if name == POLICY:
                continue
            texts = [g.text for g in ctx.generate(asked, model=self.name if name == SNAPSHOT else name, **sampling)]
            answers = [extract(t) for t in texts]
            out[name] = [answers[g * config.samples:(g + 1) * config.samples] for g in range(len(prompts))]
            ctx.log(f"answered/{name}", sum(a is not None for a in answers) / len(answers))
        return out

    @stackrl.hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        size, groups = rollout.group_size, rollout.num_groups
        extract = extractor_of(config, "rler", config.answer_extractor or rollout.answer_format)
        rows = [extract(t) for t in rollout.completions]
        if SNAPSHOT in self.active and not self.snapshot_taken:
            self._take_snapshot(ctx)  # a reward asked before training began (an evaluation)
        others = self.votes(ctx, [rollout.prompts[g * size] for g in range(groups)], extract)
        if len(self.active) < len(self.config.estimators):
            ctx.warn("absent_estimators", len(self.config.estimators) - len(self.active))
        self.last, self.last_votes = [], []
        for g in range(groups):
            mine = rows[g * size:(g + 1) * size]
            votes = ({POLICY: mine} if POLICY in self.active else {}) | {name: others[name][g] for name in others}
            self.last_votes.append({"rows": mine, "votes": votes})
            self.last.append(ensemble_reward(mine, votes, config.weights, interpolation=config.interpolation,
                                             math_verify=config.math_verify))
        rewards = torch.tensor([r for group in self.last for r in group.rewards], dtype=torch.float32)
        ctx.declare_pseudo_labels([group.label for group in self.last for _ in range(size)])
        kept = [group.kept(config.margin) or not config.select for group in self.last]
        if ctx.training:
            rollout.exclude_from_loss([i for i in range(len(rows)) if not kept[i // size]])
        ctx.acted(sum(a is not None and kept[i // size] for i, a in enumerate(rows)), of=len(rows),
                  hint="no completion stated an answer, or every group's estimators disagreed (rler.margin)")
        ctx.log("confidence", sum(group.confidence for group in self.last) / groups)
        ctx.log("disagreement", sum(group.disagreement for group in self.last) / groups)
        ctx.log("selected", sum(kept) / groups)
        if POLICY in self.active:
            coupling = correlation([s for group in self.last for s in group.self_shares], rewards)
            if coupling is not None:
                ctx.log("coupling", coupling)
        return rewards
