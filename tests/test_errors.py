"""Bad input: each mistake gets one exact message naming what is wrong and where, and nothing saved is lost."""

import os

import pytest
import yaml

from stackrl import ConfigError, PluginError, PluginHookError, Rollout
from stackrl.config import load_config
from stackrl.run import build_plugin_manager
from stackrl.testing.fixtures import train_steps


def write(tmp_path, name, tree):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(tree))
    return str(path)


def test_unknown_plugin_suggests_the_closest(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["digit_rewrd"]})
    with pytest.raises(PluginError) as error:
        load_config([path])
    message = str(error.value)
    assert message.startswith(f"unknown plugin 'digit_rewrd' in plugins ({path}). Did you mean 'digit_reward'? Installed: ")
    assert "group_rank" in message


def test_unknown_config_key_names_file_and_key(tmp_path):
    path = write(tmp_path, "a.yaml", {"model": {"name_or_pth": "x"}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == f"{path}: unknown key 'model.name_or_pth'. Did you mean 'name_or_path'?"


def test_unknown_plugin_section_key(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["prompt_suffix"], "prompt_suffix": {"sufix": "!"}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == f"{path}: unknown key 'prompt_suffix.sufix'. Did you mean 'suffix'?"


def test_unknown_trainer_key(tmp_path):
    path = write(tmp_path, "a.yaml", {"trainer": {"lerning_rate": 1e-5}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        f"{path}: unknown key 'trainer.lerning_rate' (not a GRPOConfig field). Did you mean 'learning_rate'?"
    )


def test_section_of_a_plugin_not_selected(tmp_path):
    path = write(tmp_path, "a.yaml", {"group_rank": {"record": False}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        f"{path}: unknown key 'group_rank'. 'group_rank' is an installed plugin: add it to 'plugins' to use this section."
    )


def test_wrong_type_names_the_layer_and_key(tmp_path):
    base = write(tmp_path, "base.yaml", {"plugins": ["group_rank"]})
    with pytest.raises(ConfigError) as error:
        load_config([base], ["group_rank.record=maybe"])
    assert str(error.value) == (
        "command line: wrong type for 'group_rank.record': Value 'maybe' is not a valid bool (type str)"
    )


def test_missing_value(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["needs_value"]})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        "missing value for 'needs_value.threshold': set it in a config file or pass needs_value.threshold=VALUE "
        "on the command line"
    )


def test_hook_with_a_wrong_argument_name_is_refused_at_registration(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["wrong_argument"]})
    with pytest.raises(PluginError) as error:
        build_plugin_manager(load_config([path]))
    assert str(error.value) == (
        "plugin 'wrong_argument': hook 'reward' has unknown argument 'cxt'. Did you mean 'ctx'? The spec is reward(ctx)"
    )


def test_plugin_raising_in_a_hook_is_named_with_hook_and_step(make_config):
    config = make_config(["digit_reward", "raises"], raises={"hook": "reward", "at_step": 1})
    with pytest.raises(PluginHookError) as error:
        train_steps(config, steps=3)
    first_line, frame = str(error.value).splitlines()
    assert first_line == "plugin 'raises' failed in hook 'reward' at step 1: RuntimeError: deliberate failure"
    assert frame == f"  at {error.value.frame}" and error.value.frame.endswith(" in _maybe_raise")
    assert isinstance(error.value.__cause__, RuntimeError)


def test_excluding_a_row_outside_the_rollout_is_refused_whole():
    rollout = Rollout(prompts=["a", "a"], completions=["x", "y"], prompt_ids=[[1], [1]], completion_ids=[[2], [3]],
                      columns={}, group_size=2)
    with pytest.raises(PluginError, match="exclude_from_loss: row 2 is outside the rollout of 2 rows"):
        rollout.exclude_from_loss([0, 2])
    assert rollout.excluded == set()


@pytest.mark.parametrize(
    "mode, message",
    [
        ("nan", "plugin 'bad_reward' returned nan from hook 'reward' at step 0 (completion 15)"),
        ("short", "plugin 'bad_reward' returned 15 rewards from hook 'reward' at step 0; expected 16, one per completion"),
    ],
)
def test_reward_plugin_breaking_its_contract(make_config, mode, message):
    config = make_config(["bad_reward"], bad_reward={"mode": mode}, trainer={"per_device_train_batch_size": 16})
    with pytest.raises(PluginError) as error:
        train_steps(config, steps=1)
    assert str(error.value) == message


def test_failures_leave_earlier_checkpoints_whole_and_no_partial_one(make_config, tmp_path):
    saving = {"save_strategy": "steps", "save_steps": 1}
    config = make_config(["digit_reward", "raises"], raises={"hook": "reward", "at_step": 2}, trainer=saving)
    with pytest.raises(PluginHookError):
        train_steps(config, steps=4)
    run = tmp_path / "run"
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert not list(run.rglob("*.tmp"))
    resumed = train_steps(make_config(["digit_reward"], trainer=saving), steps=3, resume=str(run / "checkpoint-2"))
    assert resumed.state.global_step == 3


def test_a_plugin_failing_to_give_its_state_writes_no_checkpoint(make_config, tmp_path):
    config = make_config(
        ["digit_reward", "raises"],
        raises={"hook": "state_dict"},
        trainer={"save_strategy": "steps", "save_steps": 1},
    )
    with pytest.raises(PluginHookError) as error:
        train_steps(config, steps=1)
    assert str(error.value).splitlines()[0] == "plugin 'raises' failed in hook 'state_dict': RuntimeError: deliberate failure"
    assert not os.path.exists(tmp_path / "run" / "checkpoint-1")


def test_wrong_type_in_a_file(tmp_path):
    path = write(tmp_path, "a.yaml", {"model": {"quantization": "four"}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        f"{path}: wrong type for 'model.quantization': Value 'four' of type 'str' could not be converted to Integer"
    )


def test_weight_for_an_unknown_reward_component(tmp_path):
    from stackrl.run import validate

    path = write(tmp_path, "a.yaml", {"plugins": ["digit_reward"], "rewards": {"exact_match": 1.0, "digit_rewards": 2}})
    with pytest.raises(ConfigError) as error:
        validate(load_config([path]))
    assert str(error.value) == (
        "rewards.digit_rewards: no reward component of that name in this run; available: exact_match, digit_reward"
    )
