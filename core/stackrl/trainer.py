"""``StackTrainer``: TRL's GRPOTrainer with the five hook stages called at its override points.

Where TRL gives a seam, the trainer calls ``super()`` and adds only what plugins asked for, so with no plugin
every number is TRL's:

=========== ===================================================================================================
sample      ``_generate``: prompt transforms; a generation takeover runs as TRL's ``rollout_func``
reward      ``_calculate_rewards``: every component (built-in outcome rewards, then plugins) is computed once on
            the whole gathered batch; TRL receives one reward function per component that reads its slice, so
            TRL's weighting, NaN handling and logging stay its own
advantage   ``_generate_and_score_completions``: TRL's GRPO advantages, gathered, then the estimator and the
            reshapers, then the importance weights of rows another policy wrote (:mod:`stackrl.importance`);
            the local slice goes back, per sample or per token; the plugins' clip range is kept
distill     ``_compute_loss``: TRL's loss (under the rows' clip range, where a plugin set one) plus the weighted
            loss terms, scaled for accumulation as TRL's is
post-step   a callback: ``post_step``, ``train_begin``, ``train_end``; plugin state rides in checkpoints
=========== ===================================================================================================

The training rows go through the prompt pool (:mod:`stackrl.pool`): it keeps each row's statistics, and once a
plugin steers it, it replaces the rows TRL's sampler chose at the start of ``_generate_and_score_completions``.
"""

from __future__ import annotations

import logging
import numbers
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from accelerate.utils import gather_object
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from stackrl.aux_models import aux_models_of
from stackrl.context import (
    ACTIVITY,
    WARNINGS,
    AdvantageContext,
    LossContext,
    RewardContext,
    Rollout,
    SampleContext,
    Samples,
    StepContext,
)
from stackrl.errors import ConfigError, PluginError, StackrlError
from stackrl.importance import checked_behaviour_logprobs, rollout_weights, weighted
from stackrl.manager import STAGES, PluginManager
from stackrl.policy import PolicyAccess, snapshots_of
from stackrl.policy_ops import PHASE_PREFIX, supervised_phase
from stackrl.pool import POOL_ROW, POOL_STATE_FILE, Pool, added_file
from stackrl.rewards import OUTCOME_REWARDS, ROLE_COLUMN, SOLUTION_ROLES
from stackrl.samples import append_samples, sample_records
from stackrl.sandbox_section import SandboxSection
from stackrl.truth import TRUTH_COLUMN, truth_figures
from stackrl.weights import reward_schedules

logger = logging.getLogger(__name__)

PLUGIN_STATE_FILE = "stackrl_plugins.pt"
SNAPSHOTS_FILE = "stackrl_snapshots.pt"  # the snapshots kept with checkpoint=True
ROW_INDEX = "stackrl_row"  # each row's index in the whole rollout; per-sample so TRL's shuffle carries it
UNCLIPPED_LOSSES = ("sapo", "vespo")  # TRL's loss types that read no clip range: a clip_range plugin is refused


class _ResumableRepeatSampler(RepeatSampler):
    """TRL's sampler, whose order for epoch ``e`` is the same whether the run got there straight or by resuming.

    TRL draws each epoch's order from one generator carried from epoch to epoch, so a run resumed in epoch 2
    would shuffle as if in epoch 0. transformers calls ``set_epoch`` before every epoch (also the one resumed
    in): reseeding and replaying the earlier epochs' draws gives exactly the order an uninterrupted run sees.
    """

    def set_epoch(self, epoch: int) -> None:
        if self.shuffle and self.seed is not None:
            self.generator.manual_seed(self.seed)
            for _ in range(epoch):
                torch.randperm(self.num_samples, generator=self.generator)


def last_checkpoint(run_dir: str) -> str | None:
    """The run's latest complete checkpoint, or ``None``. The plugin state is written last, so a save cut short
    (Ctrl-C, a crash) leaves a folder without it, which is passed over."""
    if not os.path.isdir(run_dir):
        return None
    steps = {}
    for name in os.listdir(run_dir):
        found = re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", name)
        if found and os.path.isfile(os.path.join(run_dir, name, PLUGIN_STATE_FILE)):
            steps[int(found.group(1))] = os.path.join(run_dir, name)
    return steps[max(steps)] if steps else None


def check_finite(plugin: str, hook: str, step, what: str, values) -> None:
    """Refuse NaN and infinity in a plugin's numbers (a tensor, or a list where ``None`` means "not scored")."""
    if not isinstance(values, torch.Tensor):
        values = torch.tensor([0.0 if v is None else float(v) for v in values])
    flat = values.detach().flatten()
    bad = (~torch.isfinite(flat)).nonzero()
    if len(bad):
        i = int(bad[0])
        raise PluginError(f"plugin '{plugin}' returned {float(flat[i])} from hook '{hook}' at step {step} ({what} {i})")


def reward_components(outcome_rewards, plugins: PluginManager) -> list[str]:
    """The run's reward components in order: built-in outcome rewards, then reward plugins in config order."""
    components = [*outcome_rewards, *plugins.implementers("reward")]
    if not components:
        raise ConfigError("no reward: name a built-in outcome reward under 'rewards' or add a reward plugin")
    return components


def loss_weights_by_name(weights: dict[str, float] | None, names: list[str]) -> dict[str, float]:
    """A weight for each loss term of ``names`` (default 1.0); a weight for any other name is a config error."""
    weights = dict(weights or {})
    for name in weights:
        if name not in names:
            raise ConfigError(
                f"losses.{name}: no loss term of that name in this run; available: {', '.join(names) or 'none'}"
            )
    return {name: float(weights.get(name, 1.0)) for name in names}


def default_reward_weights(plugins: PluginManager) -> dict:
    """Each reward plugin's own weight (or schedule) for its component, where the config's ``rewards`` gives none."""
    return {name: plugins.plugins[name].reward_weight() for name in plugins.implementers("reward")}


@dataclass
class Activity:
    """What a plugin reported through ``ctx.acted`` over some steps: it acted on ``acted`` of ``of`` things."""

    acted: float = 0.0
    of: float = 0.0
    hint: str | None = None  # the plugin's latest guess at the setting at fault, for a window it did nothing in

    def add(self, acted: float, of: float, hint: str | None = None) -> None:
        self.acted += acted
        self.of += of
        self.hint = hint or self.hint

    @property
    def share(self) -> float:
        return self.acted / self.of if self.of else 0.0


class StackTrainer(GRPOTrainer):
    """A GRPOTrainer whose rollouts, rewards, advantages and losses plugins can change.

    ``outcome_rewards`` maps a component name to ``fn(completion_text, reference_answer) -> float``; the
    reference answer comes from the dataset column ``answer_column``; ``answer_format`` is how the run's
    completions state their final answer (:mod:`stackrl.answers`), for the plugins that follow it.
    ``reward_weights`` maps component names to weights or weight schedules (:mod:`stackrl.weights`; default: the
    plugin's ``reward_weight()``, 1.0 for the built-in rewards), ``loss_weights`` loss-term names to weights (default 1.0). ``run_files`` (file name ->
    text) are written into every checkpoint next to the plugin state. At every logging step, the first ``log_samples`` groups of the
    rollout go to ``samples.jsonl`` in the output folder. Where the data hides its answers from hooks
    (``stackrl.truth.TRUTH_COLUMN``), every reward component is logged against them, each completion judged by the
    outcome reward ``truth_metric``. ``prompt_format`` makes a prompt from a row's columns as the training data's
    were made (``ctx.pool.format_row``, for rows plugins write). Rows a ``generate_rollout`` plugin gives with
    behaviour log-probs have their advantages weighted by ``min(importance_truncation, pi_now / pi_behaviour)``
    per token or per row (``importance_level``; :mod:`stackrl.importance`).
    ``sandbox`` is the config's ``sandbox`` section, handed to every context for the plugins that run programs.
    """

    def __init__(
        self,
        *,
        plugins: PluginManager,
        outcome_rewards: dict[str, Callable[[str, str], float]] | None = None,
        answer_column: str = "answer",
        answer_format: str = "auto",
        reward_weights: dict[str, float] | None = None,
        loss_weights: dict[str, float] | None = None,
        run_files: dict[str, str] | None = None,
        log_samples: int = 0,
        truth_metric: str = "exact_match",
        prompt_format: Callable[[dict], Any] | None = None,
        importance_truncation: float = 3.0,
        importance_level: str = "token",
        sandbox: SandboxSection | None = None,
        **kwargs,
    ):
        if kwargs.get("reward_funcs"):
            raise StackrlError("StackTrainer computes its own rewards: give outcome_rewards, not reward_funcs")
        self.plugins = plugins
        self._outcome_rewards = dict(outcome_rewards or {})
        self._answer_column = answer_column
        self._answer_format = answer_format
        self._prompt_format = prompt_format
        self._sandbox = sandbox
        self._run_files = dict(run_files or {})
        self._log_samples = log_samples
        self._truth_metric = truth_metric
        self._importance = (importance_truncation, importance_level)
        self._samples_logged_at: int | None = None
        self._loss_weights = loss_weights_by_name(loss_weights, plugins.implementers("loss_term"))
        components = reward_components(self._outcome_rewards, plugins)
        self._reward_schedules = reward_schedules(reward_weights, components, default_reward_weights(plugins))
        grpo_args = kwargs["args"]
        if grpo_args.reward_weights is not None:
            raise ConfigError("trainer.reward_weights is set by stackrl from 'rewards'; remove it from 'trainer'")
        grpo_args.reward_weights = [self._reward_schedules[name].at(0) for name in components]
        if plugins.has("clip_range") and grpo_args.loss_type in UNCLIPPED_LOSSES:
            raise ConfigError(
                f"trainer.loss_type: '{grpo_args.loss_type}' does not clip the importance ratio, so the clip range "
                f"that plugin {', '.join(plugins.implementers('clip_range'))} sets would do nothing; choose a loss "
                "that clips (grpo, bnpo, dr_grpo, dapo, luspo or cispo)"
            )
        self._rollouts: dict[str, Rollout] = {}
        self._local_prompt_ids: list[list[int]] = []
        self._added_columns: dict[str, list] = {}  # what generate_rollout returned for the whole batch
        self._added_loss_mask: list[list[int]] | None = None
        self._added_behaviour: list | None = None  # Samples.behaviour_logprobs of the whole batch
        self._pending_rows: list[dict] = []
        self._rollout_pool_ids: list[int | None] = []  # the pool id of each row of the last rollout, read off its gather
        self._sample_ctx: SampleContext | None = None
        self._policy_logps: torch.Tensor | None = None
        self.warnings: Counter[str] = Counter()  # "<plugin>/<name>" -> occurrences ctx.warn counted in this run
        # ctx.acted's reports: this step's, this logging window's, and the run's (from this start or resume on).
        self._step_activity: dict[str, Activity] = {}
        self._window_activity: dict[str, Activity] = {}
        self.activity: dict[str, Activity] = {}
        self._idle_warned: set[str] = set()
        if hasattr(kwargs.get("train_dataset"), "add_column"):  # a map-style dataset: each row carries its pool id
            kwargs["train_dataset"] = kwargs["train_dataset"].add_column(POOL_ROW, range(len(kwargs["train_dataset"])))
        self._context_warned: set[str] = set()  # plugins already told their prompts pass the model's context
        with warnings.catch_warnings():
            # TRL calls rollout_func experimental; it is how the host runs generate_rollout, not the user's choice.
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
            super().__init__(
                reward_funcs=[self._component_reader(name) for name in components],
                rollout_func=self._plugin_rollout if plugins.has("generate_rollout") else None,
                **kwargs,
            )
        self._shared_policy = PolicyAccess(self, sharded=True)
        self.pool = self._make_pool(self.train_dataset)
        self.add_callback(_HookCallback(self))

    # -- shared plumbing ------------------------------------------------------------------------------------------

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if type(sampler) is not RepeatSampler:
            return sampler
        return _ResumableRepeatSampler(
            data_source=sampler.data_source,
            mini_repeat_count=sampler.mini_repeat_count,
            batch_size=sampler.batch_size,
            repeat_count=sampler.repeat_count,
            shuffle=sampler.shuffle,
            seed=sampler.seed,
        )

    @property
    def _mode(self) -> str:
        return "train" if self.model.training else "eval"

    @property
    def _group_size(self) -> int:
        return self.num_generations if self._mode == "train" else self.num_generations_eval

    def _log_metric_now(self, name: str, value: float) -> None:
        self._count_warning(name, value)
        self._metrics[self._mode][name].append(value)

    def _count_warning(self, name: str, value: float) -> None:
        """Total what ``ctx.warn`` logs, for the run summary; say so in the log the first time each one occurs."""
        if not name.startswith(f"{WARNINGS}/") or not value:
            return
        key = name[len(WARNINGS) + 1 :]
        if key not in self.warnings:
            logger.warning(
                "%s: %g at step %d (metric %s; the run summary counts every occurrence)",
                key, value, self.state.global_step, name,
            )
        self.warnings[key] += int(value)

    def check_context(self, plugin: str, how: str, prompt_ids: list[list[int]], max_new_tokens: int, setting: str):
        """Warn once per plugin whose prompts, with ``max_new_tokens`` more, pass the model's context: past it a
        model degrades or fails, and transformers says only that "a generation call" exceeded it."""
        limit = getattr(self.model.config, "max_position_embeddings", None)
        longest = max(map(len, prompt_ids), default=0)
        if not limit or longest + max_new_tokens <= limit or plugin in self._context_warned:
            return
        self._context_warned.add(plugin)
        logger.warning(
            "plugin '%s' %s a prompt of %d tokens at step %d; with %s=%d new tokens that passes the model's context "
            "of %d tokens (max_position_embeddings): shorten what %s writes into prompts (the templates of its "
            "section '%s') or lower %s",
            plugin, how, longest, self.state.global_step, setting, max_new_tokens, limit, plugin, plugin, setting,
        )

    def create_model_card(self, *args, **kwargs):
        """No card of TRL's (it names no base model for a local one, nor any plugin): the run's own card is one of
        ``run_files`` (``stackrl.run.model_card``)."""

    def _context(self, cls, **fields):
        return cls(
            step=self.state.global_step,
            tokenizer=self.processing_class,
            training=self.model.training,
            policy=fields.pop("policy", self._shared_policy),
            _log=fields.pop("_log", self._log_metric_now),
            _acted=self._count_activity,
            sandbox=self._sandbox,
            **fields,
        )

    # -- activity: what each plugin acted on ----------------------------------------------------------------------

    def _count_activity(self, plugin: str, acted: float, of: float, hint: str | None) -> None:
        self._step_activity.setdefault(plugin, Activity()).add(acted, of, hint)

    def _close_activity_step(self) -> None:
        """Log each reporting plugin's share of this step as ``activity/<plugin>``; TRL averages it over the window."""
        for plugin, step in self._step_activity.items():
            self._metrics["train"][f"{ACTIVITY}/{plugin}"].append(step.share)
            self._window_activity.setdefault(plugin, Activity()).add(step.acted, step.of, step.hint)
            self.activity.setdefault(plugin, Activity()).add(step.acted, step.of)
        self._step_activity = {}

    def _warn_idle_plugins(self) -> None:
        """Once per plugin: the first logging window in which it acted on none of what it could act on, in its own
        words (a window with nothing to act on, such as a schedule's end, is no warning)."""
        for plugin, window in self._window_activity.items():
            if window.acted == 0 and window.of > 0 and plugin not in self._idle_warned:
                self._idle_warned.add(plugin)
                hint = f"; {window.hint}" if window.hint else ""
                logger.warning(
                    "%s acted on nothing up to step %d: 0 of %g %s%s (metric %s/%s)",
                    plugin, self.state.global_step, window.of, self._activity_words(plugin), hint, ACTIVITY, plugin,
                )
        self._window_activity = {}

    def _activity_words(self, plugin: str) -> str:
        return self.plugins.plugins[plugin].activity or "things it could act on"

    def activity_summary(self) -> list[str]:
        """One line per plugin of the run: what it acted on, over the run (from this start or resume on)."""
        lines = []
        for plugin in self.plugins.plugins:
            total = self.activity.get(plugin)
            if total is None:
                lines.append(f"{plugin}: reported no activity (a plugin reports it with ctx.acted)")
                continue
            lines.append(
                f"{plugin}: {total.acted:g} of {total.of:g} {self._activity_words(plugin)} ({total.share:.0%}) over the run"
            )
        return lines

    def _local_slice(self, n_local: int) -> slice:
        start = self.accelerator.process_index * n_local
        return slice(start, start + n_local)

    # -- sample ---------------------------------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs):
        training = self._mode == "train" and self.pool is not None
        if training and self.pool.steered:
            inputs = self._pool_rows(len(inputs))
        self._pending_rows = inputs
        output = super()._generate_and_score_completions(inputs)
        n_local = output["prompt_ids"].size(0)
        local = self._local_slice(n_local)
        output[ROW_INDEX] = torch.arange(local.start, local.stop, device=output["prompt_ids"].device)
        rollout = self._rollouts[self._mode]
        rollout.advantages = self.accelerator.gather(output["advantages"]).cpu()
        if rollout.behaviour_logprobs is not None:
            rollout.importance_weights = self._importance_weights(rollout)
        if rollout.importance_weights is not None or any(self.plugins.has(hook) for hook in STAGES["advantage"]):
            output["advantages"] = self._advantage_stage(output, local)
        excluded = self._rollouts[self._mode].excluded  # the same on every process: hooks see the whole batch
        if excluded:
            self._exclude_from_loss(output, local, excluded)
        if training and (self.plugins.has("train_begin") or self.plugins.has("post_step")):
            # Only the hooks that see ctx.pool read its statistics; a run without them skips the per-group loop.
            self._record_pool_batch(self._rollout_pool_ids)
        return output

    # -- the prompt pool ------------------------------------------------------------------------------------------

    def _make_pool(self, dataset) -> Pool | None:
        if dataset is None or POOL_ROW not in getattr(dataset, "column_names", ()):
            return None
        written = added_file(self.args.output_dir) if self.is_world_process_zero() else None
        return Pool(dataset, seed=self.args.seed, answer_column=self._answer_column, added_file=written,
                    format_prompt=self._prompt_format)

    def _pool_rows(self, n_local: int) -> list[dict]:
        """This process's rows of the next batch the pool draws: each problem ``num_generations`` times in a row."""
        n_global = n_local * self.accelerator.num_processes
        problems = self.pool.draw(n_global // self.num_generations, self.state.global_step)
        rows = [row for row in problems for _ in range(self.num_generations)]
        return [self.pool.row(row) for row in rows[self._local_slice(n_local)]]

    def _record_pool_batch(self, rows: list[int]) -> None:
        """Each group's pass rate (every built-in outcome reward at 1) and mean token-mean |advantage|."""
        rollout = self._rollouts["train"]
        size = rollout.group_size
        outcome = [rollout.rewards[name] for name in self._outcome_rewards]
        passed = scored = None
        if outcome:
            stacked = torch.stack(outcome, dim=1)
            scored = ~stacked.isnan().any(dim=1)
            passed = (stacked >= 1).all(dim=1) & scored
        advantages = rollout.advantages.abs()
        if advantages.dim() == 2:
            mask = rollout.completion_mask().float()
            advantages = (advantages * mask).sum(1) / mask.sum(1).clamp(min=1)
        pass_rates, abs_advantages = [], []
        for group in range(rollout.num_groups):
            span = slice(group * size, (group + 1) * size)
            n_scored = 0 if scored is None else int(scored[span].sum())
            pass_rates.append(float(passed[span].sum()) / n_scored if n_scored else None)
            abs_advantages.append(float(advantages[span].mean()))
        self.pool.record(rows[::size], pass_rates, abs_advantages)

    def _exclude_from_loss(self, output: dict, local: slice, excluded: set[int]) -> None:
        """Zero the excluded rows this process holds in TRL's loss-only mask, and recount its token normaliser.

        TRL multiplies ``completion_mask`` by ``tool_mask`` (1 on the tokens the model generated) in the policy
        loss and its normaliser only: attention, and the loss terms' ``completion_mask``, keep the rows.
        """
        loss_mask = output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        loss_mask[[row - local.start for row in excluded if local.start <= row < local.stop]] = 0
        output["tool_mask"] = loss_mask
        output["num_items_in_batch"] = self.accelerator.gather((output["completion_mask"] * loss_mask).sum()).sum()

    def _generate(self, prompts):
        self._added_columns, self._added_loss_mask, self._added_behaviour = {}, None, None
        if self.plugins.has("transform_prompts") or self.plugins.has("generate_rollout"):
            ctx = self._context(
                SampleContext,
                rollout_columns=self._columns(gather_object(self._pending_rows)),
                group_size=self._group_size,
                answer_format=self._answer_format,
            )
            everyone = gather_object(list(prompts))

            def same_length(plugin, new):
                if len(new) != len(everyone):
                    raise PluginError(
                        f"plugin '{plugin}' returned {len(new)} prompts from hook 'transform_prompts' at step "
                        f"{ctx.step}; expected {len(everyone)} (one per row)"
                    )
                self.check_context(plugin, "made (transform_prompts)", self._tokenize_prompts(new)[0],
                                   self.args.max_completion_length, "trainer.max_completion_length")
                return list(new)

            transformed = self.plugins.chain("transform_prompts", "prompts", everyone, ctx=ctx, check=same_length)
            self._sample_ctx = ctx
            output = super()._generate(transformed[self._local_slice(len(prompts))])
            if ctx.train_on_original:
                output = (self._tokenize_prompts(prompts)[0], *output[1:])
        else:
            output = super()._generate(prompts)
        self._local_prompt_ids = [list(ids) for ids in output[0]]
        return output

    def _plugin_rollout(self, prompts, trainer):
        """TRL's ``rollout_func``: the ``generate_rollout`` plugin samples the whole batch, each rank keeps its rows."""
        everyone = gather_object(list(prompts))
        plugin, samples = self.plugins.exclusive("generate_rollout", prompts=everyone, ctx=self._sample_ctx)
        local = self._local_slice(len(prompts))
        prompt_ids = self._tokenize_prompts(prompts)[0]
        if samples is None:
            completion_ids, logprobs = self._generate_single_turn(prompt_ids, None, {}, self._sample_ctx.group_size)
            return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}
        where = f"plugin '{plugin}' hook 'generate_rollout' at step {self._sample_ctx.step}"
        if not isinstance(samples, Samples):
            raise PluginError(f"{where} returned {type(samples).__name__}; expected stackrl.Samples")
        for field in ("completion_ids", "prompt_ids"):
            given = getattr(samples, field)
            if given is not None and len(given) != len(everyone):
                raise PluginError(f"{where} returned {len(given)} {field}; expected {len(everyone)} (one per row)")
        if samples.prompt_ids is not None:
            prompt_ids = samples.prompt_ids[local]
        output = {"prompt_ids": prompt_ids, "completion_ids": samples.completion_ids[local], "logprobs": None}
        self._added_columns = self._checked_columns(where, samples.columns, len(everyone))
        if samples.loss_mask is not None:
            self._added_loss_mask = self._checked_loss_mask(where, samples.loss_mask, samples.completion_ids)
            output["env_mask"] = self._added_loss_mask[local]  # TRL's name for its loss-only tool_mask
        if samples.behaviour_logprobs is not None:
            self._added_behaviour = checked_behaviour_logprobs(where, samples.behaviour_logprobs, samples.completion_ids)
        return output

    def _checked_columns(self, where: str, columns: dict, n: int) -> dict[str, list]:
        dataset_columns = {"prompt", *(self._pending_rows[0] if self._pending_rows else {})}
        for name, values in columns.items():
            if name in dataset_columns:
                raise PluginError(f"{where} returned column '{name}', which the dataset already has")
            if len(values) != n:
                raise PluginError(f"{where} returned {len(values)} values in column '{name}'; expected {n} (one per row)")
        return {name: list(values) for name, values in columns.items()}

    @staticmethod
    def _checked_loss_mask(where: str, loss_mask: list, completion_ids: list) -> list[list[int]]:
        if len(loss_mask) != len(completion_ids):
            raise PluginError(f"{where} returned {len(loss_mask)} loss_mask rows; expected {len(completion_ids)}")
        for row, (mask, ids) in enumerate(zip(loss_mask, completion_ids)):
            if len(mask) != len(ids):
                raise PluginError(
                    f"{where} returned a loss_mask of {len(mask)} tokens for row {row}, whose completion has {len(ids)}"
                )
            if any(v not in (0, 1) for v in mask):
                raise PluginError(f"{where} returned a loss_mask for row {row} with values other than 0 and 1")
        return [[int(v) for v in mask] for mask in loss_mask]

    # -- reward ---------------------------------------------------------------------------------------------------

    def _columns(self, rows: list[dict]) -> dict[str, list]:
        """The dataset columns hooks see: all but the prompt and the hidden answers."""
        keys = [k for k in (rows[0] if rows else {}) if k not in ("prompt", TRUTH_COLUMN, POOL_ROW)]
        return {k: [row[k] for row in rows] for k in keys}

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        texts = [c if isinstance(c, str) else "".join(m["content"] for m in c) for c in completions]
        rows = list(zip(inputs, prompts, texts, self._local_prompt_ids, completion_ids_list, strict=True))
        rows = gather_object(rows)
        self._rollout_pool_ids = [r[0].get(POOL_ROW) for r in rows]
        rollout = Rollout(
            prompts=[r[1] for r in rows],
            completions=[r[2] for r in rows],
            prompt_ids=[list(r[3]) for r in rows],
            completion_ids=[list(r[4]) for r in rows],
            columns={**self._columns([r[0] for r in rows]), **self._added_columns},
            group_size=self._group_size,
            loss_mask=self._added_loss_mask,
            answer_column=self._answer_column,
            answer_format=self._answer_format,
            behaviour_logprobs=self._added_behaviour,
        )
        self._rollouts[self._mode] = rollout
        self._weigh_rewards(self.state.global_step)
        self._compute_reward_components(rollout)
        if TRUTH_COLUMN in rows[0][0]:
            truth = [r[0][TRUTH_COLUMN] for r in rows]
            check = OUTCOME_REWARDS[self._truth_metric]
            for name, value in truth_figures(rollout, truth, check, self._truth_metric == "math_verify").items():
                self._log_metric_now(name, value)
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _weigh_rewards(self, step: int) -> None:
        """TRL's ``reward_weights`` for this rollout: each component's schedule at ``step``; a scheduled weight is
        logged (``reward_weight/<component>``), so a run shows when a component was muted."""
        weights = [self._reward_schedules[name].at(step) for name in self.reward_func_names]
        self.reward_weights = torch.tensor(weights, dtype=torch.float32)
        for name, weight in zip(self.reward_func_names, weights):
            if not self._reward_schedules[name].constant:
                self._log_metric_now(f"reward_weight/{name}", weight)

    def _compute_reward_components(self, rollout: Rollout) -> None:
        # Rows of a role that answers no question (a verdict, a reflection) are the plugin's to score.
        roles = rollout.columns.get(ROLE_COLUMN)
        solutions = [True] * len(rollout) if roles is None else [role in SOLUTION_ROLES for role in roles]
        for name, fn in self._outcome_rewards.items():
            answers = rollout.columns[self._answer_column]
            # A row without an answer (one a plugin added to the pool label-free) is not the outcome reward's to score.
            values = [
                fn(text, answer) if solution and answer is not None else float("nan")
                for text, answer, solution in zip(rollout.completions, answers, solutions)
            ]
            rollout.rewards[name] = torch.tensor(values, dtype=torch.float32)
        if not self.plugins.has("reward"):
            return
        ctx = self._context(RewardContext, rollout=rollout)
        for name, values in self.plugins.each("reward", ctx=ctx):
            rollout.rewards[name] = self._check_rewards(name, ctx.step, values, len(rollout))

    @staticmethod
    def _check_rewards(plugin: str, step: int, values, n: int) -> torch.Tensor:
        if isinstance(values, torch.Tensor):
            values = values.detach().float().cpu()
            if values.dim() != 1:
                raise PluginError(
                    f"plugin '{plugin}' returned rewards of shape {tuple(values.shape)} from hook 'reward' at step "
                    f"{step}; expected ({n},), one per completion"
                )
            values = values.tolist()
        if values is None or len(values) != n:
            got = "None" if values is None else f"{len(values)} rewards"
            raise PluginError(
                f"plugin '{plugin}' returned {got} from hook 'reward' at step {step}; expected {n}, one per completion"
            )
        for i, value in enumerate(values):
            # float() would take "1.0" and True without complaint: a reward is a real number, nothing that converts.
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
                raise PluginError(
                    f"plugin '{plugin}' returned {value!r} ({type(value).__name__}) from hook 'reward' at step {step} "
                    f"(completion {i}); expected a number (int or float) or None"
                )
        check_finite(plugin, "reward", step, "completion", values)
        return torch.tensor([float("nan") if v is None else float(v) for v in values], dtype=torch.float32)

    def _component_reader(self, name: str):
        def read(prompts, **_):
            rewards = self._rollouts[self._mode].rewards[name]
            return rewards[self._local_slice(len(prompts))].tolist()

        read.__name__ = name
        return read

    # -- advantage ------------------------------------------------------------------------------------------------

    def _advantage_stage(self, output: dict, local: slice) -> torch.Tensor:
        rollout = self._rollouts[self._mode]
        weights = self.reward_weights.cpu()
        components = torch.stack([rollout.rewards[name] for name in self.reward_func_names], dim=1)
        ctx = self._context(AdvantageContext, rollout=rollout, total_reward=(components * weights).nansum(dim=1))
        width = rollout.completion_mask().size(1)

        def valid(plugin: str, hook: str, adv) -> torch.Tensor:
            where = f"plugin '{plugin}' hook '{hook}' at step {ctx.step}"
            if not isinstance(adv, torch.Tensor):
                raise PluginError(f"{where} returned {type(adv).__name__}; expected a tensor")
            if adv.shape not in ((len(rollout),), (len(rollout), width)):
                raise PluginError(
                    f"{where} returned advantages of shape {tuple(adv.shape)}; expected ({len(rollout)},) or "
                    f"({len(rollout)}, {width})"
                )
            check_finite(plugin, hook, ctx.step, "element", adv)
            return adv.detach().float().cpu()

        plugin, advantages = self.plugins.exclusive("estimate_advantages", ctx=ctx)
        advantages = rollout.advantages if advantages is None else valid(plugin, "estimate_advantages", advantages)
        advantages = self.plugins.chain(
            "reshape_advantages",
            "advantages",
            advantages,
            ctx=ctx,
            check=lambda plugin, adv: valid(plugin, "reshape_advantages", adv),
        )
        if rollout.importance_weights is not None:
            advantages = weighted(advantages, rollout.importance_weights)
        rollout.advantages = advantages
        if self.plugins.has("clip_range"):
            rollout.clip = self._plugin_clip(ctx, width)
        mine = advantages[local]
        if mine.dim() == 2:  # per token: fit the local padded width (TRL may pad to a multiple)
            padded_width = output["completion_ids"].size(1)
            mine = torch.nn.functional.pad(mine, (0, max(0, padded_width - width)))[:, :padded_width]
        return mine.to(output["advantages"].device)

    def _importance_weights(self, rollout: Rollout) -> torch.Tensor:
        """The rows' truncated importance weights, from the current policy's scores of the rows that carry behaviour
        log-probs (every process scores its share; all get the whole), their figures logged."""
        truncation, level = self._importance
        found = rollout_weights(
            rollout.prompt_ids, rollout.completion_ids, rollout.behaviour_logprobs, rollout.loss_mask,
            lambda prompts, completions: self._shared_policy.score(prompts, completions, temperature=self.temperature),
            truncation, level,
        )
        for name, value in found.figures().items():
            self._log_metric_now(name, value)
        return found.weights

    def _plugin_clip(self, ctx: AdvantageContext, width: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The chained ``clip_range``; ``None`` while no plugin changed the config's range (TRL's loss as it is)."""
        n = len(ctx.rollout)
        config = (torch.full((n,), float(self.epsilon_low)), torch.full((n,), float(self.epsilon_high)))

        def valid(plugin: str, clip) -> tuple[torch.Tensor, torch.Tensor]:
            where = f"plugin '{plugin}' hook 'clip_range' at step {ctx.step}"
            if not (isinstance(clip, tuple | list) and len(clip) == 2 and all(isinstance(b, torch.Tensor) for b in clip)):
                raise PluginError(f"{where} returned {type(clip).__name__}; expected a pair (low, high) of tensors")
            for side, bound in zip(("low", "high"), clip):
                if bound.shape not in ((n,), (n, width)):
                    raise PluginError(
                        f"{where} returned {side} of shape {tuple(bound.shape)}; expected ({n},) or ({n}, {width})"
                    )
                check_finite(plugin, "clip_range", ctx.step, f"{side} element", bound)
            low, high = (bound.detach().float().cpu() for bound in clip)
            if (low < 0).any() or (low > 1).any() or (high < 0).any():
                raise PluginError(f"{where} returned a bound outside its range: low must lie in [0, 1], high be >= 0")
            return low, high

        clip = self.plugins.chain("clip_range", "clip", config, ctx=ctx, check=valid)
        return None if clip is config else clip

    @contextmanager
    def _clip_range(self, inputs: dict):
        """TRL's loss reads ``epsilon_low``/``epsilon_high`` as scalars or anything that broadcasts against the
        ``(B, T)`` ratio: for the loss of these rows, they are the plugins' range."""
        clip = self._rollouts[self._mode].clip
        if clip is None:
            yield
            return
        rows, width = inputs[ROW_INDEX].cpu(), inputs["completion_ids"].size(1)
        config = self.epsilon_low, self.epsilon_high

        def local(bound: torch.Tensor, fill: float) -> torch.Tensor:
            bound = bound[rows]
            if bound.dim() == 1:
                bound = bound.unsqueeze(1)
            else:  # per token: fit the micro-batch's padded width, as per-token advantages do
                bound = torch.nn.functional.pad(bound, (0, max(0, width - bound.size(1))), value=fill)[:, :width]
            return bound.to(inputs["completion_ids"].device)

        self.epsilon_low, self.epsilon_high = (local(bound, fill) for bound, fill in zip(clip, config))
        try:
            yield
        finally:
            self.epsilon_low, self.epsilon_high = config

    # -- distill --------------------------------------------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if kwargs.get("compute_entropy"):  # only _compute_loss asks for entropies
            self._policy_logps = result[0]  # the loss's own forward (attached to the graph when training)
        return result

    def _compute_loss(self, model, inputs):
        with self._clip_range(inputs):
            loss = super()._compute_loss(model, inputs)
        if not self.plugins.has("loss_term"):
            return loss
        rows = inputs[ROW_INDEX].tolist()
        ctx = self._context(
            LossContext,
            policy=PolicyAccess(self, sharded=False, model=model),
            rollout=self._rollouts[self._mode].select(rows),
            prompt_ids=inputs["prompt_ids"],
            prompt_mask=inputs["prompt_mask"],
            completion_ids=inputs["completion_ids"],
            completion_mask=inputs["completion_mask"],
            advantages=inputs["advantages"],
            policy_logps=self._policy_logps,
            loss_mask=inputs["completion_mask"] * inputs.get("tool_mask", 1),
        )
        # TRL's loss is already divided by the accumulation steps (loss_is_scaled_for_ga); terms follow suit.
        scale = 1.0 / self.current_gradient_accumulation_steps if self._mode == "train" else 1.0
        for name, term in self.plugins.each("loss_term", ctx=ctx):
            if term is None:
                continue
            if not isinstance(term, torch.Tensor) or term.dim() != 0:
                shape = tuple(term.shape) if isinstance(term, torch.Tensor) else type(term).__name__
                raise PluginError(
                    f"plugin '{name}' returned {shape} from hook 'loss_term' at step {ctx.step}; expected a scalar tensor"
                )
            check_finite(name, "loss_term", ctx.step, "term", term)
            loss = loss + self._loss_weights[name] * scale * term
            self._metrics[self._mode][f"loss/{name}"].append(term.item())
        return loss

    # -- post-step, lifecycle, checkpoints ------------------------------------------------------------------------

    def notify(self, hook: str) -> None:
        """Call a lifecycle hook; what plugins log there is a training metric, whatever mode the model is in."""
        if not self.plugins.has(hook):
            return
        logged: dict[str, list[float]] = {}

        def log(name: str, value: float) -> None:
            self._count_warning(name, value)
            logged.setdefault(name, []).append(value)

        pool = self.pool if hook in ("train_begin", "post_step") else None
        phase = self._supervised_phase if hook == "post_step" else None
        ctx = self._context(StepContext, rollout=self._rollouts.get("train"), _log=log, _pool=pool, _phase=phase)
        self.plugins.each(hook, ctx=ctx)
        if hook == "train_end" and logged:
            # TRL has written its last log line by now: write these as one more.
            self.log_figures({k: sum(v) / len(v) for k, v in logged.items()})
            return
        for name, values in logged.items():
            self._metrics["train"][name].extend(values)

    def _supervised_phase(self, plugin: str, name: str, contexts, completion_ids, **options) -> dict:
        """A plugin's supervised phase, its figures logged at once as their own line under ``phase/<name>/``."""
        figures = supervised_phase(self, self._shared_policy, name, contexts, completion_ids, **options)
        self.log_figures({f"{PHASE_PREFIX}{name}/{key}": value for key, value in figures.items()})
        logger.info("plugin '%s' ran supervised phase '%s' at step %d: %s", plugin, name, self.state.global_step, figures)
        return figures

    # -- logs -----------------------------------------------------------------------------------------------------

    def log(self, logs, start_time=None):
        aux_models = aux_models_of(self)
        # What the auxiliary models were asked since the last step's line (not on TRL's closing summary line).
        if aux_models is not None and self._mode == "train" and "train_runtime" not in logs:
            logs.update(aux_models.window_figures())
        super().log(logs, start_time)
        step = self.state.global_step
        if self._mode == "train":
            self._warn_idle_plugins()
        # TRL's summary at the end of training logs the last step a second time: its samples are written once.
        logging_samples = self._log_samples and self._mode == "train" and "train" in self._rollouts
        if logging_samples and step != self._samples_logged_at:
            self._samples_logged_at = step
            if self.is_world_process_zero():
                append_samples(self.args.output_dir, self._sample_records(step))

    def log_figures(self, figures: dict[str, float]) -> None:
        """One log line, to every reporter, of figures computed outside a training step (held-out evaluations,
        what plugins log at ``train_end``): TRL's per-mode averaging of step metrics is bypassed."""
        # Logging clears control.should_log; called from a step's end, that would drop the step's own log line.
        should_log = self.control.should_log
        Trainer.log(self, figures)
        self.control.should_log = should_log

    def _sample_records(self, step: int) -> list[dict]:
        rollout = self._rollouts["train"]
        rows = range(min(self._log_samples, rollout.num_groups) * rollout.group_size)
        trained_prompts = {}
        if self.plugins.has("transform_prompts") or self.plugins.has("generate_rollout"):
            original_ids = self._tokenize_prompts([rollout.prompts[i] for i in rows])[0]
            trained_prompts = {
                i: self.processing_class.decode(rollout.prompt_ids[i])
                for i in rows
                if list(original_ids[i]) != list(rollout.prompt_ids[i])
            }
        weights = dict(zip(self.reward_func_names, self.reward_weights.tolist()))
        return sample_records(step, rollout, self._log_samples, weights, self._answer_column, trained_prompts)

    def _save_checkpoint(self, model, trial):
        # Ask every plugin for its state before anything is written: a plugin that fails leaves no partial checkpoint.
        states = dict(self.plugins.each("state_dict"))
        for name, state in states.items():
            if state is not None and not isinstance(state, dict):
                raise PluginError(f"plugin '{name}' returned {type(state).__name__} from hook 'state_dict'; expected a dict")
        super()._save_checkpoint(model, trial)
        if not self.args.should_save:
            return
        folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        for file_name, text in self._run_files.items():
            _write_atomic(os.path.join(folder, file_name), lambda f, t=text: f.write(t.encode()))
        if self.pool is not None:
            _write_atomic(os.path.join(folder, POOL_STATE_FILE), lambda f: torch.save(self.pool.state_dict(), f))
        kept = {name: s.state_dict() for name, s in snapshots_of(self).items() if s.checkpointed}
        if kept:
            _write_atomic(os.path.join(folder, SNAPSHOTS_FILE), lambda f: torch.save(kept, f))
        # Last: its presence marks the checkpoint complete (see last_checkpoint).
        _write_atomic(os.path.join(folder, PLUGIN_STATE_FILE), lambda f: torch.save(states, f))

    def train(self, resume_from_checkpoint=None, **kwargs):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise StackrlError(f"resume: no checkpoint found in {self.args.output_dir}")
        if resume_from_checkpoint:
            self._load_plugin_states(resume_from_checkpoint)
        elif self.pool is not None:
            self.pool.forget_added_rows_file()  # a fresh run in an old run folder lists only its own rows
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def _load_plugin_states(self, checkpoint: str) -> None:
        pool_path = os.path.join(checkpoint, POOL_STATE_FILE)
        if self.pool is not None and os.path.exists(pool_path):
            self.pool.load_state_dict(torch.load(pool_path, weights_only=True))
        snapshots_path = os.path.join(checkpoint, SNAPSHOTS_FILE)
        if os.path.exists(snapshots_path):
            for name, saved in torch.load(snapshots_path, weights_only=True).items():
                self._shared_policy.update_snapshot(name, checkpoint=True)
                snapshots_of(self)[name].load_state_dict(saved, f"{snapshots_path}: snapshot '{name}'")
        path = os.path.join(checkpoint, PLUGIN_STATE_FILE)
        states = torch.load(path, weights_only=True) if os.path.exists(path) else {}
        for name in self.plugins.implementers("load_state_dict"):
            if name not in states or states[name] is None:
                logger.warning("checkpoint %s holds no state for plugin '%s'; it starts fresh", checkpoint, name)
                continue
            self.plugins.call_one(name, "load_state_dict", state=states[name])


class _HookCallback(TrainerCallback):
    """Relays TRL's training events to the lifecycle hooks (callbacks never receive the trainer)."""

    def __init__(self, trainer: StackTrainer):
        self._trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self._trainer.notify("train_begin")

    def on_step_end(self, args, state, control, **kwargs):
        self._trainer.notify("post_step")
        self._trainer._close_activity_step()

    def on_train_end(self, args, state, control, **kwargs):
        self._trainer.notify("train_end")


def _write_atomic(path: str, write) -> None:
    """Write through a temporary file and rename, so a reader never sees half a file."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)
