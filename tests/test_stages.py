"""Each stage's hook, implemented by one small installed plugin, acts as its spec says."""

import pytest
import torch

from stackrl.testing.fixtures import train_steps
from stackrl.trainer import ROW_INDEX


def rollout_of(trainer):
    return trainer._rollouts["train"]


def buffered_rows(trainer):
    """The last generation batch as the loss sees it, put back in rollout order."""
    batch = trainer._buffered_inputs[0]
    order = batch[ROW_INDEX].argsort()
    return {k: v[order] for k, v in batch.items() if isinstance(v, torch.Tensor) and v.dim() > 0}


def test_prompt_transform_reaches_generation(make_config):
    trainer = train_steps(make_config(["prompt_suffix", "digit_reward"], prompt_suffix={"suffix": " Answer:"}), steps=1)
    rollout = rollout_of(trainer)
    trained_prompts = trainer.processing_class.batch_decode(rollout.prompt_ids)
    assert all(p.endswith(" Answer:") for p in trained_prompts)
    assert not any(p.endswith(" Answer:") for p in rollout.prompts), "rewards see the dataset's prompts"


def test_train_on_original_prompt(make_config, monkeypatch):
    from stackrl_test_plugins import PromptSuffix

    from stackrl import hookimpl

    def keep_original(self, prompts, ctx):
        ctx.train_on_original = True
        return [p + self.config.suffix for p in prompts]

    monkeypatch.setattr(PromptSuffix, "transform_prompts", hookimpl(keep_original))
    trainer = train_steps(make_config(["prompt_suffix", "digit_reward"]), steps=1)
    trained_prompts = trainer.processing_class.batch_decode(rollout_of(trainer).prompt_ids)
    assert not any(p.endswith(" Answer:") for p in trained_prompts)


def test_generation_takeover_samples_the_batch(make_config):
    trainer = train_steps(make_config(["greedy_rollout", "digit_reward"], greedy_rollout={"max_new_tokens": 4}), steps=1)
    rollout = rollout_of(trainer)
    assert all(len(ids) <= 4 for ids in rollout.completion_ids)
    groups = [rollout.completions[i : i + rollout.group_size] for i in range(0, len(rollout), rollout.group_size)]
    assert all(len(set(g)) == 1 for g in groups), "greedy decoding gives one completion per prompt"


def test_reward_component_reaches_advantages_and_logs(make_config):
    trainer = train_steps(make_config(["digit_reward"], rewards={"exact_match": 1.0, "digit_reward": 2.0}), steps=1)
    rollout = rollout_of(trainer)
    total = rollout.rewards["exact_match"] + 2.0 * rollout.rewards["digit_reward"]
    grouped = total.view(-1, rollout.group_size)
    expected = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    assert torch.allclose(buffered_rows(trainer)["advantages"], expected.flatten(), atol=1e-5)
    logged = trainer.state.log_history[0]
    assert logged["rewards/digit_reward/mean"] == float(rollout.rewards["digit_reward"].mean())


def test_reward_plugin_can_score_with_the_policy(make_config):
    trainer = train_steps(make_config(["logprob_reward"]), steps=1)
    rewards = rollout_of(trainer).rewards["logprob_reward"]
    assert (rewards < 0).all() and rewards.std() > 0


def test_estimator_replaces_grpo(make_config):
    trainer = train_steps(make_config(["flat_advantage", "digit_reward"]), steps=1)
    assert torch.equal(buffered_rows(trainer)["advantages"], torch.ones(len(rollout_of(trainer))))


def test_per_token_advantages_reach_the_loss(make_config):
    trainer = train_steps(make_config(["digit_reward", "token_decay"]), steps=1)
    batch = trainer._buffered_inputs[0]
    advantages, mask = batch["advantages"], batch["completion_mask"]
    assert advantages.shape == batch["completion_ids"].shape
    # On-policy the importance ratio is 1, so TRL's default (dapo) loss is -sum(A * mask) / tokens.
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, batch)
    expected = -(advantages * mask).sum() / mask.sum()
    assert torch.allclose(loss.detach(), expected, atol=1e-5)


def test_rows_excluded_from_the_loss_leave_its_mask_and_normaliser(make_config, monkeypatch):
    from stackrl_test_plugins import DigitReward

    from stackrl import hookimpl

    scored = DigitReward.reward

    def exclude_the_first_group(self, ctx):
        ctx.rollout.exclude_from_loss(range(ctx.rollout.group_size))
        return scored(self, ctx)

    monkeypatch.setattr(DigitReward, "reward", hookimpl(exclude_the_first_group))
    trainer = train_steps(make_config(["digit_reward"], trainer={"per_device_train_batch_size": 8}), steps=1)
    rows, batch = buffered_rows(trainer), trainer._buffered_inputs[0]
    mask, advantages = rows["completion_mask"] * rows["tool_mask"], rows["advantages"]  # what TRL's loss counts
    assert mask[:4].sum() == 0 and (mask[4:].sum(1) > 0).all() and (rows["completion_mask"].sum(1) > 0).all()
    assert advantages[:4].abs().sum() > 0, "the excluded rows keep their advantages; only the mask drops them"
    assert batch["num_items_in_batch"] == mask.sum()
    # On-policy the ratio is 1: TRL's dapo loss is -sum(A * mask) over the kept tokens / the kept tokens.
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, batch)
    assert torch.allclose(loss.detach(), -(advantages.unsqueeze(1) * mask).sum() / mask.sum(), atol=1e-5)


def _off_policy(trainer, batch):
    """``batch`` as if sampled by an earlier policy: the current one's ratio to it is 1.3 on rows of positive
    advantage, 0.7 on negative ones, so the config's range (0.2) clips both; returns the ratio per row."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, batch["completion_ids"].size(1))
    advantages = batch["advantages"]
    ratio = torch.where(advantages > 0, 1.3, torch.where(advantages < 0, 0.7, 1.0))
    return {**batch, "old_per_token_logps": logps.detach() - ratio.log().unsqueeze(1)}, ratio


def _clipped_loss(batch, ratio, low, high):
    """TRL's dapo loss by hand: -min(r A, clip(r, 1 - low, 1 + high) A) over the tokens it trains."""
    advantages, mask = batch["advantages"], batch["completion_mask"] * batch.get("tool_mask", 1)
    clipped = torch.minimum(torch.maximum(ratio, 1 - low), 1 + high)
    per_row = -torch.minimum(ratio * advantages, clipped * advantages)
    return (per_row.unsqueeze(1) * mask).sum() / mask.sum()


def test_clip_range_narrows_exactly_the_rows_it_names(make_config):
    config = make_config(["digit_reward", "narrow_first_group"], trainer={"per_device_train_batch_size": 8})
    trainer = train_steps(config, steps=1)
    group_size = rollout_of(trainer).group_size
    batch, ratio = _off_policy(trainer, trainer._buffered_inputs[0])
    first = batch[ROW_INDEX] < group_size
    assert batch["advantages"][first].abs().min() > 0 and batch["advantages"][~first].abs().max() > 0
    trainer.model.train()
    low = torch.where(first, 0.05, 0.2)
    high = torch.where(first, 0.1, 0.2)
    narrowed = trainer.compute_loss(trainer.model, batch).detach()
    assert torch.allclose(narrowed, _clipped_loss(batch, ratio, low, high), atol=1e-5)
    assert trainer.epsilon_low == trainer.epsilon_high == 0.2, "the config's range is back after the loss"
    rollout_of(trainer).clip = None  # TRL's own loss on the same batch: the narrowed rows alone made the difference
    plain = trainer.compute_loss(trainer.model, batch).detach()
    assert torch.allclose(plain, _clipped_loss(batch, ratio, torch.tensor(0.2), torch.tensor(0.2)), atol=1e-5)
    assert not torch.allclose(narrowed, plain, atol=1e-4)


def test_clip_range_per_token_and_a_bad_range_named(make_config, monkeypatch):
    from stackrl_test_plugins import NarrowFirstGroup

    from stackrl import PluginError, hookimpl

    def per_token(self, clip, ctx):
        width = ctx.rollout.completion_mask().size(1)
        return clip[0].unsqueeze(1).expand(-1, width), torch.full((len(ctx.rollout), width), 0.1)

    monkeypatch.setattr(NarrowFirstGroup, "clip_range", hookimpl(per_token))
    trainer = train_steps(make_config(["digit_reward", "narrow_first_group"]), steps=1)
    batch, ratio = _off_policy(trainer, trainer._buffered_inputs[0])
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, batch).detach()
    assert torch.allclose(loss, _clipped_loss(batch, ratio, torch.tensor(0.2), torch.tensor(0.1)), atol=1e-5)

    monkeypatch.setattr(NarrowFirstGroup, "clip_range", hookimpl(lambda self, clip, ctx: (clip[0], -clip[1])))
    with pytest.raises(PluginError, match=r"plugin 'narrow_first_group' hook 'clip_range' at step 0 .* high be >= 0"):
        train_steps(make_config(["digit_reward", "narrow_first_group"]), steps=1)


def test_clip_range_refused_with_a_loss_that_does_not_clip(make_config):
    from stackrl import ConfigError
    from stackrl.run import build_trainer

    with pytest.raises(ConfigError, match=r"trainer.loss_type: 'sapo' does not clip .* plugin narrow_first_group"):
        build_trainer(make_config(["digit_reward", "narrow_first_group"], trainer={"loss_type": "sapo"}))


def test_loss_term_changes_the_gradient_by_its_weight(make_config):
    trainer = train_steps(make_config(["digit_reward", "logp_loss"]), steps=1)
    batch = trainer._buffered_inputs[0]
    model = trainer.model

    def gradient(loss):
        model.zero_grad()
        loss.backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    def loss_with(weight):
        trainer._loss_weights["logp_loss"] = weight
        return trainer.compute_loss(model, batch)

    # The term alone: the mean of each completion's mean log-prob, computed without the plugin.
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, attention, batch["completion_ids"].size(1))
    mask = batch["completion_mask"].float()
    term = gradient(((logps * mask).sum(1) / mask.sum(1).clamp(min=1)).mean())

    assert term.abs().max() > 1e-4
    assert torch.allclose(gradient(loss_with(0.5)) - gradient(loss_with(0.0)), 0.5 * term, atol=1e-6)


def test_post_step_runs_after_each_step_and_logs(make_config, hook_recorder):
    trainer = train_steps(make_config(["digit_reward", "step_counter"]), steps=3, monitor=hook_recorder)
    assert trainer.plugins.plugins["step_counter"].steps == 3
    assert [h["step_counter/steps"] for h in trainer.state.log_history if "step_counter/steps" in h] == [1, 2, 3]
    assert hook_recorder.order("post_step") == ["step_counter"] * 3


def test_lifecycle_hooks_log_as_training_metrics(make_config):
    history = train_steps(make_config(["digit_reward", "step_counter"]), steps=2).state.log_history
    assert history[0]["step_counter/started_at"] == 0
    assert history[-1]["step_counter/total_steps"] == 2 and history[-1]["step"] == 2
