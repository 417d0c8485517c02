"""How several plugins on one hook combine: collected and chained in config order, exclusive refused."""

import pytest
import torch

from stackrl import PluginError
from stackrl.run import build_plugin_manager
from stackrl.testing.fixtures import train_steps


@pytest.mark.parametrize("order", [["digit_reward", "group_rank"], ["group_rank", "digit_reward"]])
def test_collected_rewards_all_act_in_config_order(make_config, hook_recorder, order):
    trainer = train_steps(make_config(order), steps=1, monitor=hook_recorder)
    assert hook_recorder.order("reward") == order
    assert list(trainer._rollouts["train"].rewards) == ["exact_match", *order]
    assert trainer.reward_func_names == ["exact_match", *order]


def test_chained_prompt_transforms_pass_values_in_config_order(make_config):
    before = train_steps(make_config(["prompt_recorder", "prompt_suffix", "digit_reward"]), steps=1)
    after = train_steps(make_config(["prompt_suffix", "prompt_recorder", "digit_reward"]), steps=1)
    assert not any(p.endswith(" Answer:") for p in before.plugins.plugins["prompt_recorder"].received[0])
    assert all(p.endswith(" Answer:") for p in after.plugins.plugins["prompt_recorder"].received[0])


def test_two_estimators_without_a_winner_are_refused(make_config):
    config = make_config(["flat_advantage", "centered_advantage", "digit_reward"])
    with pytest.raises(PluginError) as error:
        build_plugin_manager(config)
    assert str(error.value) == (
        "plugins 'flat_advantage' and 'centered_advantage' both implement the exclusive hook 'estimate_advantages'; "
        "choose one in the config with exclusive.estimate_advantages: <plugin>"
    )


def test_the_named_winner_of_an_exclusive_hook_is_used(make_config, hook_recorder):
    config = make_config(
        ["flat_advantage", "centered_advantage", "digit_reward"],
        exclusive={"estimate_advantages": "centered_advantage"},
    )
    trainer = train_steps(config, steps=1, monitor=hook_recorder)
    assert hook_recorder.order("estimate_advantages") == ["centered_advantage"]
    rollout = trainer._rollouts["train"]
    total = rollout.rewards["exact_match"] + rollout.rewards["digit_reward"]
    grouped = total.view(-1, rollout.group_size)
    assert torch.allclose(rollout.advantages, (grouped - grouped.mean(1, keepdim=True)).flatten())
