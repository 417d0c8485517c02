"""stackrl.plugin: training_only, the rollout a plugin makes in training and leaves to plain sampling in evaluation."""

from types import SimpleNamespace

import pluggy

from stackrl import Plugin, hookimpl, hookspecs
from stackrl.plugin import training_only


class _Rollouts(Plugin):
    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        return [f"{p}!" for p in prompts]


def test_training_only_answers_while_training_and_leaves_evaluation_to_plain_sampling():
    plugin = _Rollouts()
    assert plugin.generate_rollout(["a"], SimpleNamespace(training=True)) == ["a!"]
    assert plugin.generate_rollout(["a"], SimpleNamespace(training=False)) is None


def test_a_training_only_hook_is_called_by_its_hook_arguments():
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    manager.register(_Rollouts())
    assert manager.hook.generate_rollout(prompts=["a"], ctx=SimpleNamespace(training=True)) == ["a!"]
    assert manager.hook.generate_rollout(prompts=["a"], ctx=SimpleNamespace(training=False)) is None
