"""The hooks a stackrl plugin can implement: one section per stage of a training step.

A plugin is a class (see :class:`stackrl.Plugin`) whose methods carry ``@stackrl.hookimpl`` and are named after
the hooks below. A method may accept any subset of its hook's arguments. The host calls plugins in the order the
config's ``plugins:`` list gives; how several plugins on one hook combine is part of each hook's contract:

- *chained*: each plugin receives what the previous one returned (``None`` passes the value on unchanged);
- *collected*: every plugin's result is kept under the plugin's name and combined with a weight from the config;
- *exclusive*: one plugin answers; two claimants are refused unless ``exclusive.<hook>`` names the winner;
- *notified*: every plugin is called, return values are ignored.

``docs/hooks.md`` is the same reference in prose; a test keeps the two in step.
"""

from __future__ import annotations

import pluggy

PROJECT = "stackrl"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# -- sample ----------------------------------------------------------------------------------------------------------


@hookspec
def transform_prompts(prompts, ctx):
    """Rewrite the prompts a rollout is generated from. Chained, in config order.

    When: once per generation batch, before generation, on every process.
    Sees: ``prompts``, the whole batch as whole groups (each prompt repeated ``ctx.group_size`` times in a row),
    already transformed by the plugins before this one; ``ctx``, a :class:`stackrl.SampleContext`.
    May change: return a list of the same length to replace the prompts, or ``None`` to keep them. The policy is
    trained on the transformed prompts unless a plugin sets ``ctx.train_on_original = True``. Rewards and logs
    see the dataset's original prompts.

    Example::

        @hookimpl
        def transform_prompts(self, prompts, ctx):
            return [p + "\\nThink step by step." for p in prompts]
    """


@hookspec(firstresult=True)
def generate_rollout(prompts, ctx):
    """Take over generation of the whole batch. Exclusive.

    When: once per generation batch, after ``transform_prompts``, in place of the host's own generation.
    Sees: ``prompts`` (the whole batch, transformed), ``ctx`` (:class:`stackrl.SampleContext`), whose
    ``generate`` and ``score`` let the plugin sample and score with the current policy as often as it needs.
    May change: return a :class:`stackrl.Samples` with one completion per prompt, in order; ``prompt_ids`` may
    name the prompt each completion is trained on, ``columns`` add per-row values (such as each row's ``role``)
    to ``rollout.columns``, and ``loss_mask`` keeps injected text out of the policy loss; ``behaviour_logprobs``
    marks rows another policy wrote, whose advantages the host weights by the truncated importance ratio
    (:mod:`stackrl.importance`). Returning ``None`` lets the host generate as usual.

    Example::

        @hookimpl
        def generate_rollout(self, prompts, ctx):
            first = ctx.generate(prompts)
            return Samples(completion_ids=[g.completion_ids for g in first])
    """


# -- reward ----------------------------------------------------------------------------------------------------------


@hookspec
def reward(ctx):
    """Score every completion of the batch. Collected: one reward component per plugin, named after it.

    When: once per generation batch, after the built-in outcome rewards, in config order, on every process.
    Sees: ``ctx`` (:class:`stackrl.RewardContext`): the whole rollout as whole groups, and in
    ``ctx.rollout.rewards`` the components computed before this one.
    May change: return one number per completion (a list of ints or floats, or a 1-D tensor); ``None`` marks a
    completion the plugin does not score. NaN, a string or a bool is an error. The host adds
    ``rewards.<plugin name>`` (default 1.0) times the result to the total that advantages are computed from, and
    logs the component as ``rewards/<plugin name>``.

    Example::

        @hookimpl
        def reward(self, ctx):
            return [min(len(c) / 100, 1.0) for c in ctx.rollout.completions]
    """


# -- advantage -------------------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def estimate_advantages(ctx):
    """Replace the advantage estimator. Exclusive; the host default is GRPO exactly as TRL computes it.

    When: once per generation batch, after rewards, on every process.
    Sees: ``ctx`` (:class:`stackrl.AdvantageContext`): the rollout with its reward components and
    ``ctx.rollout.advantages``, the host's GRPO advantages, and ``ctx.total_reward``, the weighted sum.
    May change: return advantages for the whole batch, shape ``(N,)`` per sample or ``(N, T)`` per token
    (``T`` = the longest completion; padding positions are ignored), or ``None`` to keep GRPO's.

    Example::

        @hookimpl
        def estimate_advantages(self, ctx):
            r = ctx.total_reward.view(-1, ctx.group_size)
            return ((r - r.mean(1, keepdim=True))).flatten()   # Dr. GRPO: no std scaling
    """


@hookspec
def reshape_advantages(advantages, ctx):
    """Reshape advantages. Chained, in config order, after the estimator.

    When: once per generation batch, on every process.
    Sees: ``advantages``, shape ``(N,)`` or ``(N, T)``, as left by the estimator and the plugins before this one;
    ``ctx`` (:class:`stackrl.AdvantageContext`).
    May change: return a tensor of shape ``(N,)`` or ``(N, T)`` to replace them, or ``None`` to keep them.
    Returning ``(N, T)`` makes them per token from here on.

    Example::

        @hookimpl
        def reshape_advantages(self, advantages, ctx):
            return advantages.clamp(-2.0, 2.0)
    """


@hookspec
def clip_range(clip, ctx):
    """Set the clip range of the policy's importance ratio per row or per token. Chained, in config order.

    When: once per generation batch, after ``reshape_advantages``, on every process.
    Sees: ``clip``, a pair ``(low, high)`` of tensors of shape ``(N,)`` or ``(N, T)`` in the terms of TRL's
    ``epsilon`` and ``epsilon_high``: the loss clips the ratio to ``[1 - low, 1 + high]`` (with ``loss_type:
    cispo``, ``high`` caps the ratio itself). The first plugin sees the config's values on every row, the next what
    the one before returned. ``ctx`` (:class:`stackrl.AdvantageContext`), ``ctx.rollout.advantages`` the final
    advantages.
    May change: return a pair of tensors of those shapes to replace the range, or ``None`` to keep it. ``low`` lies
    in ``[0, 1]``, ``high`` is at least 0. While every plugin returns ``None`` the loss is TRL's, unchanged.

    Example::

        @hookimpl
        def clip_range(self, clip, ctx):
            low, high = clip
            agreed = ctx.total_reward.view(-1, ctx.group_size).std(1) == 0
            return low, torch.where(agreed.repeat_interleave(ctx.group_size), high / 2, high)
    """


# -- distill ---------------------------------------------------------------------------------------------------------


@hookspec
def loss_term(ctx):
    """Add a loss term to the policy loss. Collected: one term per plugin, named after it.

    When: in every micro-batch's loss computation, after TRL's policy loss, on each process for its own rows.
    Sees: ``ctx`` (:class:`stackrl.LossContext`): the micro-batch's rows, ``ctx.policy_logps`` (the policy's
    per-token log-probs of the completions, with gradient), and ``score`` to run a teacher or a second forward.
    May change: return a scalar tensor (or ``None`` to add nothing). The host adds ``losses.<plugin name>``
    (default 1.0) times it to the loss, scaled for gradient accumulation as TRL scales its own, and logs it as
    ``loss/<plugin name>``.

    Example::

        @hookimpl
        def loss_term(self, ctx):
            return -(ctx.policy_logps * ctx.completion_mask).sum() / ctx.completion_mask.sum()
    """


# -- post-step -------------------------------------------------------------------------------------------------------


@hookspec
def post_step(ctx):
    """Act after an optimizer step: curricula, trackers, schedules. Notified, in config order.

    When: after every optimizer step (and its learning-rate update), before that step's metrics are logged.
    Sees: ``ctx`` (:class:`stackrl.StepContext`): the step just completed, the last rollout, and ``ctx.pool``, the
    prompt pool with its rows' statistics (:mod:`stackrl.pool`).
    May change: the plugin's own state; the pool (weights, added or retired rows, a stage switch), which chooses
    the next generation batch; metrics logged through ``ctx.log`` appear in this step's log.

    Example::

        @hookimpl
        def post_step(self, ctx):
            self.temperature = max(0.5, self.temperature * 0.99)
            ctx.log("temperature", self.temperature)
    """


@hookspec
def train_begin(ctx):
    """Called once when training starts (also on resume, after state is restored). Notified, in config order.

    Sees: ``ctx`` (:class:`stackrl.StepContext`) with ``ctx.step`` the step training starts from.
    May change: the plugin's own state; ``ctx.pool``, as in ``post_step`` (on resume the pool is already restored).

    Example::

        @hookimpl
        def train_begin(self, ctx):
            self.seen = self.seen or {}
    """


@hookspec
def train_end(ctx):
    """Called once when training ends. Notified, in config order.

    Sees: ``ctx`` (:class:`stackrl.StepContext`) with ``ctx.step`` the last step.

    Example::

        @hookimpl
        def train_end(self, ctx):
            ctx.log("tracked_prompts", len(self.seen))
    """


# -- checkpoints -----------------------------------------------------------------------------------------------------


@hookspec
def state_dict():
    """Return the plugin's state to store in a checkpoint. Collected, one entry per plugin.

    When: at every checkpoint save, before anything is written.
    May change: nothing. Return a dict of plain values and tensors (``torch.save`` with ``weights_only``
    loading must accept it).

    Example::

        @hookimpl
        def state_dict(self):
            return {"levels": self.levels}
    """


@hookspec
def load_state_dict(state):
    """Restore what ``state_dict`` returned. Notified, in config order, each plugin with its own entry.

    When: on resume, before ``train_begin``; a plugin with no entry in the checkpoint is not called (a warning
    says so) and starts fresh.
    Sees: ``state``, this plugin's entry of the checkpoint.

    Example::

        @hookimpl
        def load_state_dict(self, state):
            self.levels = dict(state["levels"])
    """
