"""The env plugin: the conformance suite (its default, the calculator on the built-in task, trains two steps) and
its run checks."""

from types import SimpleNamespace

import pytest

from stackrl import ConfigError, Rollout
from stackrl.run import validate
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin


class TestConformance(PluginConformance):
    plugin_name = "env"
    refused_settings = [
        ({"max_turns": 0}, "must be at least 1"),
        ({"environment": "nowhere:Game"}, "cannot import"),
        ({"on_unparsed": "ignore"}, "must be one of"),
    ]


def test_groups_must_split_into_episodes(make_config):
    config = make_config(["env"], env={"environment": "tictactoe"}, trainer={"num_generations": 3, "per_device_train_batch_size": 3})
    with pytest.raises(ConfigError, match=r"trainer.num_generations \(3\) must be a multiple of 2"):
        validate(config)


def test_a_rollout_another_plugin_generated_is_left_unscored():
    """Stacked under another generate_rollout (exclusive.generate_rollout names the other), env plays no episode: its
    reward scores no row rather than failing, and the activity check then reports it idle."""
    rollout = Rollout(prompts=["p", "p"], completions=["a", "b"], prompt_ids=[[0], [0]], completion_ids=[[1], [2]],
                      columns={}, group_size=2)
    assert make_plugin("env").reward(SimpleNamespace(rollout=rollout)) == [None, None]
