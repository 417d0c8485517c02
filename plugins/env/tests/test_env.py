"""The env plugin: the conformance suite (its default, the calculator on the built-in task, trains two steps) and
its run checks."""

import pytest

from stackrl import ConfigError
from stackrl.run import validate
from stackrl.testing.conformance import PluginConformance


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
