"""How several plugins on one hook combine: collected and chained in config order, exclusive refused; every pair of
the repository's method plugins validates together."""

import itertools
from pathlib import Path

import pytest
import torch
import yaml

from stackrl import PluginError
from stackrl.cli import main
from stackrl.manager import EXCLUSIVE_HOOKS, PluginManager, installed_plugins
from stackrl.run import build_plugin_manager
from stackrl.testing.fixtures import train_steps
from stackrl.testing.repository import method_plugins

METHODS = method_plugins(Path(__file__).resolve().parents[1])


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


def _claims(name: str) -> set[str]:
    """The exclusive hooks plugin ``name`` implements."""
    plugin = installed_plugins()[name].load()()
    plugin.name = name
    manager = PluginManager([plugin])
    return {hook for hook in EXCLUSIVE_HOOKS if manager.has(hook)}


@pytest.mark.parametrize("pair", list(itertools.combinations(METHODS, 2)), ids="+".join)
def test_every_pair_of_method_plugins_validates(pair, tmp_path, capsys):
    """Each pair of plugins/*, with their CPU recipes' settings, through `stackrl config validate` (no model loads):
    two claimants of an exclusive hook are refused naming the pair and the hook, and pass once the config names a
    winner; every other pair passes as it is. tests/test_scale.py trains them all stacked."""
    weights = {name: METHODS[name]["reward"] for name in pair if METHODS[name]["reward"] is not None}
    sections = {name: METHODS[name]["settings"] for name in pair}
    path = tmp_path / "pair.yaml"
    path.write_text(yaml.safe_dump({"plugins": list(pair), "rewards": {"exact_match": 1.0, **weights}, **sections}))
    shared = [hook for hook in EXCLUSIVE_HOOKS if hook in _claims(pair[0]) & _claims(pair[1])]
    if shared:
        assert main(["config", "validate", str(path)]) == 2
        clash = f"{path}: plugins '{pair[0]}' and '{pair[1]}' both implement the exclusive hook '{shared[0]}'"
        assert clash in capsys.readouterr().err
    winners = [f"exclusive.{hook}={pair[0]}" for hook in shared]
    assert main(["config", "validate", str(path), *winners]) == 0, capsys.readouterr().err
