"""SEC in training: the conformance suite, the pool's category weights after each step equal the bandit's
softmax, each rollout counted once, the values across save and resume."""

import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl_sec import category_rewards, draw_probabilities

QUICK = {"per_device_train_batch_size": 12, "num_generations": 2, "max_completion_length": 8}


class TestConformance(PluginConformance):
    plugin_name = "sec"


def test_each_step_moves_the_values_and_reweights_the_pool(make_config):
    # The built-in model solves some problems, so categories differ in |advantage|.
    trainer = {**QUICK, "max_steps": 3, "max_completion_length": 48}
    config = make_config(["sec"], trainer=trainer, model={"name_or_path": "stackrl/arith-tiny"},
                         sec={"alpha": 0.5, "temperature": 0.4})
    begun, seen = [], []

    def monitor(hook, plugin, kwargs, result):
        ctx = kwargs.get("ctx")
        if hook == "train_begin":
            begun.append(dict(ctx.pool.category_weights))
        if hook == "post_step":
            rollout = ctx.rollout
            rewards = category_rewards(rollout.columns["category"], rollout.advantages, rollout.completion_mask())
            seen.append((dict(ctx.pool.category_weights), rewards))

    run = train_steps(config, monitor=monitor)
    sec = run.plugins.plugins["sec"]
    values = {c: 0.0 for c in run.pool.categories()}
    assert begun == [pytest.approx({c: 1 / len(values) for c in values})]  # uniform before the first update
    for weights, rewards in seen:
        values = {c: 0.5 * rewards.get(c, 0.0) + 0.5 * v for c, v in values.items()}
        assert weights == pytest.approx(draw_probabilities(values, 0.4))
    assert sec.values == pytest.approx(values)
    assert any(v > 0 for v in values.values()), "no category had a reward spread: the test is void"


def test_a_rollout_shared_by_several_steps_updates_the_values_once(make_config):
    trainer = {**QUICK, "per_device_train_batch_size": 6, "steps_per_generation": 2, "max_steps": 2,
               "max_completion_length": 48}
    config = make_config(["sec"], trainer=trainer, model={"name_or_path": "stackrl/arith-tiny"}, sec={"alpha": 0.5})
    run = train_steps(config)
    sec, rollout = run.plugins.plugins["sec"], run._rollouts["train"]
    assert sec.batches_seen == run.pool.batches == 1
    rewards = category_rewards(rollout.columns["category"], rollout.advantages, rollout.completion_mask())
    assert sec.values == pytest.approx({c: 0.5 * rewards.get(c, 0.0) for c in sec.values})  # one update, not two
    assert any(v > 0 for v in sec.values.values()), "no category had a reward spread: the test is void"


def test_values_and_draws_survive_a_resume(make_config, tmp_path):
    trainer = {**QUICK, "max_steps": 4, "save_strategy": "steps", "save_steps": 2}
    straight = train_steps(make_config(["sec"], trainer=trainer, output_dir=str(tmp_path / "straight")))
    config = make_config(["sec"], trainer=trainer, output_dir=str(tmp_path / "resumed"))
    train_steps(config, callbacks=[StopAt(2)])
    resumed = train_steps(config, resume=True)
    assert resumed.plugins.plugins["sec"].values == straight.plugins.plugins["sec"].values
    assert resumed.pool.last_batch == straight.pool.last_batch
    for name, p in straight.model.named_parameters():
        assert torch.equal(p, dict(resumed.model.named_parameters())[name]), name
