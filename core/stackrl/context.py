"""What hooks see: the rollout as whole groups, and one narrow context object per stage.

Plugins never get the trainer. Each context carries the step, the tokenizer, the rollout (or, in the loss, the
micro-batch), a ``log`` for metrics, and the policy's capabilities: ``generate`` and ``score`` (:mod:`stackrl.policy`),
snapshots, and the operations on the policy's state (:mod:`stackrl.policy_ops`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch

from stackrl.errors import PluginError
from stackrl.policy_ops import scratch_update
from stackrl.pool import Pool, PoolAccess
from stackrl.sandbox_section import SandboxSection

WARNINGS = "warnings"  # the metric prefix of ctx.warn; the trainer counts these for the run summary
ACTIVITY = "activity"  # the metric prefix of ctx.acted: activity/<plugin>, the share of what it could act on

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from stackrl.policy import PolicyAccess


@dataclass
class Rollout:
    """One generation batch, whole: every completion of every prompt, on every process.

    Row ``i`` belongs to group ``i // group_size``; a group's rows are the ``group_size`` completions of one
    prompt. ``prompts`` are the dataset's prompts (text or chat messages), ``columns`` the dataset's other columns
    (``answer``, ``solution``, ...) and those a ``generate_rollout`` plugin added (``role``, ...), one value per
    row. ``loss_mask`` holds, per row, 1 on each completion token the policy loss may train and 0 on text a plugin
    injected (``None``: every token trains). ``answer_column`` names the column of the reference answers
    (``data.answer_column``): a row whose value there is ``None`` has no answer (a row a plugin added to the pool
    label-free, a self-supervised task), and the privileged-context blocks leave it as GRPO does
    (:func:`stackrl.blocks.teacher.privileged_rows`).
    """

    prompts: list
    completions: list[str]
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    columns: dict[str, list]
    group_size: int
    rewards: dict[str, torch.Tensor] = field(default_factory=dict)
    advantages: torch.Tensor | None = None
    clip: tuple[torch.Tensor, torch.Tensor] | None = None  # (low, high) per row or token: see the clip_range hook
    excluded: set[int] = field(default_factory=set)  # rows kept out of the policy loss: see exclude_from_loss
    pseudo_labels: dict[str, list] = field(default_factory=dict)  # plugin -> one label per row: see RewardContext
    loss_mask: list[list[int]] | None = None
    answer_column: str = "answer"
    answer_format: str = "auto"  # how the run's completions state their answer: stackrl.answers.Extractor's value
    # Per row, the log-probs of its tokens under the policy that sampled it, or None for a row sampled now
    # (Samples.behaviour_logprobs); None when no row has them.
    behaviour_logprobs: list | None = None
    # The truncated importance weight of each row (N,) or token (N, T) by which the host multiplies the
    # advantages after the advantage hooks (stackrl.importance): 1 on rows sampled now; None without such rows.
    importance_weights: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.completions)

    @property
    def num_groups(self) -> int:
        return len(self) // self.group_size

    @property
    def group_index(self) -> torch.Tensor:
        return torch.arange(len(self)) // self.group_size

    def completion_mask(self) -> torch.Tensor:
        """``(N, T)`` mask of real completion tokens, ``T`` the longest completion."""
        width = max((len(ids) for ids in self.completion_ids), default=0)
        lengths = torch.tensor([len(ids) for ids in self.completion_ids])
        return (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).long()

    def passing(self, reward: str, threshold: float, *, key: str, step: int) -> torch.Tensor:
        """``(N,)`` bool: the rows the reward component ``reward`` scores at least ``threshold`` (correct rollouts).

        ``key`` is the config key that named the component; a run without that component is an error naming it.
        """
        if reward not in self.rewards:
            raise PluginError(
                f"{key}: no reward component '{reward}' at step {step}; the run computes "
                f"{', '.join(self.rewards) or 'none'} (a component weighted 0 is still computed)"
            )
        return self.rewards[reward] >= threshold

    def exclude_from_loss(self, rows) -> None:
        """Keep ``rows`` out of TRL's policy loss (call it in the reward or advantage stage).

        They add no advantage, KL or entropy term and do not count in the token normaliser; loss terms still see
        them (see docs/hooks.md).
        """
        rows = [int(row) for row in rows]
        outside = [row for row in rows if not 0 <= row < len(self)]
        if outside:
            raise PluginError(f"exclude_from_loss: row {outside[0]} is outside the rollout of {len(self)} rows")
        self.excluded.update(rows)

    def select(self, rows: list[int]) -> Rollout:
        """The rollout restricted to ``rows`` (groups are no longer whole)."""
        return Rollout(
            prompts=[self.prompts[i] for i in rows],
            completions=[self.completions[i] for i in rows],
            prompt_ids=[self.prompt_ids[i] for i in rows],
            completion_ids=[self.completion_ids[i] for i in rows],
            columns={k: [v[i] for i in rows] for k, v in self.columns.items()},
            group_size=self.group_size,
            rewards={k: v[rows] for k, v in self.rewards.items()},
            advantages=None if self.advantages is None else self.advantages[rows],
            clip=None if self.clip is None else (self.clip[0][rows], self.clip[1][rows]),
            loss_mask=None if self.loss_mask is None else [self.loss_mask[i] for i in rows],
            answer_column=self.answer_column,
            answer_format=self.answer_format,
            behaviour_logprobs=None if self.behaviour_logprobs is None else [self.behaviour_logprobs[i] for i in rows],
            importance_weights=None if self.importance_weights is None else self.importance_weights[rows],
        )


@dataclass
class Samples:
    """What ``generate_rollout`` returns: one completion per prompt, and optionally the prompt to train on.

    ``columns`` are per-row values (one per prompt) merged into ``rollout.columns`` for every later stage;
    ``loss_mask`` has one 0/1 per completion token, 0 on text the plugin injected between turns, which then counts
    in neither the policy loss, its KL and entropy, nor its token normaliser.

    ``behaviour_logprobs`` marks the rows another policy wrote (a stale rollout replayed, a snapshot's sample):
    per row, the log-probs of its completion's tokens under the policy that sampled it, at the run's sampling
    temperature (``ctx.score(..., model=..., temperature=ctx.sampling_temperature)``), or ``None`` for a row the
    policy sampled now. The host multiplies those rows' advantages by the truncated importance weight
    ``min(c, pi_now / pi_behaviour)`` (the ``importance`` config section; :mod:`stackrl.importance`).
    """

    completion_ids: list[list[int]]
    prompt_ids: list[list[int]] | None = None
    columns: dict[str, list] = field(default_factory=dict)
    loss_mask: list[list[int]] | None = None
    behaviour_logprobs: list[list[float] | None] | None = None


@dataclass
class _Context:
    step: int
    tokenizer: PreTrainedTokenizerBase
    policy: PolicyAccess = field(repr=False)
    _log: Callable[[str, float], None] = field(repr=False)
    _plugin: str = field(default="", repr=False)
    _acted: Callable[[str, float, float, str | None], None] | None = field(default=None, repr=False)
    training: bool = True  # False while TRL evaluates: methods that only shape training (hints, curricula) stand aside
    # The run's `sandbox` section, which stackrl.blocks.sandbox reads (None: a context built outside a run: defaults).
    sandbox: SandboxSection | None = field(default=None, repr=False)

    @property
    def sampling_temperature(self) -> float:
        """The run's sampling temperature (``trainer.temperature``), by which TRL's loss also divides the logits."""
        return self.policy.sampling_temperature

    @property
    def eos_token_ids(self) -> list[int]:
        """The tokens that end a completion (the tokenizer's end-of-sequence and any the model declares)."""
        return self.policy.eos_token_ids

    @property
    def aux_model_names(self) -> tuple[str, ...]:
        """The run's auxiliary models by name (``aux_models:``), which ``model=`` may name; empty where none."""
        return self.policy.aux_model_names

    def generate(self, prompts: list, *, model: str = "policy", **sampling) -> list:
        """Sample one completion per prompt with the policy, the reference or a snapshot (``tools=``: callables or
        JSON schemas shown to a chat model through its chat template); see
        :meth:`stackrl.policy.PolicyAccess.generate`."""
        return self.policy.generate(prompts, model=model, caller=self._plugin, **sampling)

    def score(self, contexts: list, continuation_ids: list[list[int]], **options) -> Any:
        """Per-token log-probs of continuations; see :meth:`stackrl.policy.PolicyAccess.score`."""
        return self.policy.score(contexts, continuation_ids, **options)

    def update_snapshot(self, name: str, decay: float = 0.0, *, checkpoint: bool = False) -> None:
        """Copy the policy into snapshot ``name``, or move it there by an EMA step; see :meth:`stackrl.policy.PolicyAccess.update_snapshot`."""
        self.policy.update_snapshot(name, decay, checkpoint=checkpoint)

    def scratch_update(self, name: str, contexts: list, completion_ids: list[list[int]], **options) -> list[float]:
        """Copy the policy into snapshot ``name`` and take a few plain gradient steps on the copy only; see
        :func:`stackrl.policy_ops.scratch_update`."""
        return scratch_update(self.policy, name, contexts, completion_ids, **options)

    def log(self, name: str, value: float) -> None:
        """Log a scalar metric as ``<plugin name>/<name>`` in this step's log."""
        self._log(f"{self._plugin}/{name}", float(value))

    def warn(self, name: str, count: int = 1) -> None:
        """Count ``count`` occurrences of something that quietly weakens the method (an answer it could not read, a
        fallback taken), as the metric ``warnings/<plugin name>/<name>``: logged as a warning the first time, in
        this step's log, and totalled in the run summary."""
        self._log(f"{WARNINGS}/{self._plugin}/{name}", float(count))

    def acted(self, n: float, *, of: float, hint: str | None = None) -> None:
        """Report that this plugin acted on ``n`` of the ``of`` things it could act on here (completions scored,
        groups re-rolled, rows or tokens reweighted, ...; ``Plugin.activity`` says which). The host sums a step's
        reports and logs ``activity/<plugin name>``, the share; a logging window in which the plugin acted on
        nothing is warned of once, with ``hint``: the setting most likely at fault, where the plugin can tell."""
        if not 0 <= n <= of:
            raise PluginError(
                f"plugin '{self._plugin}' reported acting on {n} of {of} at step {self.step}; expected 0 <= n <= of"
            )
        if self._acted is not None and self.training:
            self._acted(self._plugin, float(n), float(of), hint)

    def score_probes(self, contexts: list, trajectories: list[list[int]], probes: list, **options) -> Any:
        """Log-probs of probes branching off trajectories; see :meth:`stackrl.policy.PolicyAccess.score_probes`."""
        return self.policy.score_probes(contexts, trajectories, probes, **options)


@dataclass
class SampleContext(_Context):
    """The sample stage: the batch about to be generated."""

    rollout_columns: dict[str, list] = field(default_factory=dict)
    group_size: int = 1
    train_on_original: bool = False
    answer_format: str = "auto"  # as rollout.answer_format: how the run's completions state their answer


@dataclass
class RewardContext(_Context):
    """The reward stage: the whole generated rollout."""

    rollout: Rollout = None

    def declare_pseudo_labels(self, labels: list) -> None:
        """The answer this plugin takes for correct on each row (``None``: no label), e.g. its group's majority
        answer. In a ``data.label_free`` run whose data has answers, the host logs how often they are right."""
        if len(labels) != len(self.rollout):
            raise PluginError(
                f"plugin '{self._plugin}' declared {len(labels)} pseudo-labels at step {self.step}; expected "
                f"{len(self.rollout)}, one per row"
            )
        self.rollout.pseudo_labels[self._plugin] = list(labels)


@dataclass
class AdvantageContext(_Context):
    """The advantage stage: the rollout with rewards; ``total_reward`` is the weighted sum of its components."""

    rollout: Rollout = None
    total_reward: torch.Tensor = None

    @property
    def group_size(self) -> int:
        return self.rollout.group_size

    @property
    def scored_reward(self) -> torch.Tensor:
        """``total_reward`` as float, NaN on the rows no reward component scored: an estimator that compares rows
        leaves those out of every baseline."""
        scored = ~torch.stack(list(self.rollout.rewards.values())).isnan().all(0)
        total = self.total_reward.float()
        return torch.where(scored, total, torch.full_like(total, torch.nan))


@dataclass
class LossContext(_Context):
    """The distill stage: one micro-batch of this process, padded as the policy loss sees it.

    ``prompt_ids``/``prompt_mask`` are left-padded, ``completion_ids``/``completion_mask`` right-padded, all
    ``(B, ...)``; ``policy_logps`` is ``(B, T)`` with gradient; ``rollout`` holds the same ``B`` rows as text
    with their columns and rewards; ``advantages`` is ``(B,)`` or ``(B, T)``. ``loss_mask`` is ``(B, T)``, the
    tokens TRL's policy loss trains: ``completion_mask`` less injected text and rows excluded from the loss.
    """

    rollout: Rollout = None
    prompt_ids: torch.Tensor = None
    prompt_mask: torch.Tensor = None
    completion_ids: torch.Tensor = None
    completion_mask: torch.Tensor = None
    advantages: torch.Tensor = None
    policy_logps: torch.Tensor = None
    loss_mask: torch.Tensor = None


@dataclass
class StepContext(_Context):
    """The post-step stage and the training lifecycle; ``rollout`` is the last one generated (or ``None``).

    In ``train_begin`` and ``post_step``, ``pool`` is the run's prompt pool (:class:`stackrl.pool.PoolAccess`):
    its rows' statistics, and the weights, additions, retirements and stage switches that choose the next batches.
    """

    rollout: Rollout | None = None
    _pool: Pool | None = field(default=None, repr=False)
    _phase: Callable[..., dict] | None = field(default=None, repr=False)

    def supervised_phase(self, name: str, contexts: list, completion_ids: list[list[int]], **options) -> dict:
        """In ``post_step`` only: restore the live weights from a snapshot, reset the optimizer and the schedule, and
        fine-tune on the pairs before RL resumes, logged as ``phase/<name>/...``; see
        :func:`stackrl.policy_ops.supervised_phase`."""
        if self._phase is None:
            raise PluginError(f"plugin '{self._plugin}': supervised_phase() is only available in post_step")
        return self._phase(self._plugin, name, contexts, completion_ids, **options)

    @property
    def pool(self) -> PoolAccess | None:
        """The prompt pool, as this plugin changes it at this step (``None`` in ``train_end`` or without a
        map-style training dataset)."""
        return None if self._pool is None else PoolAccess(self._pool, self._plugin, self.step)
