"""The checks every plugin package should pass. Subclass and name your plugin::

    from stackrl.testing.conformance import PluginConformance

    class TestConformance(PluginConformance):
        plugin_name = "covo"
        plugin_settings = {"covo": {"weight": 0.5}}   # optional: sections for the two-step run
        refused_settings = [({"max_steps": 0}, "must be at least 1")]  # optional: refused, naming covo.max_steps
"""

from __future__ import annotations

import re

import pytest

from stackrl.context import ACTIVITY
from stackrl.errors import ConfigError
from stackrl.manager import HOOKS, PluginManager, installed_plugins
from stackrl.testing.fixtures import HookRecorder, make_plugin, train_steps


class PluginConformance:
    plugin_name: str = ""
    plugin_settings: dict = {}
    stacked_with: tuple[str, ...] = ()  # plugins to run before it in the two-step training
    # (settings, message): settings of the plugin's section no run could use. Each is refused with a ConfigError
    # that names the plugin's key ("<plugin>.<key>", a key of the settings) and matches message, a regular expression.
    refused_settings: list[tuple[dict, str]] = []

    def test_discoverable_by_entry_point(self):
        assert self.plugin_name in installed_plugins(), f"no entry point '{self.plugin_name}' in stackrl.plugins"

    def test_config_defaults_are_valid(self, make_config):
        config = make_config([self.plugin_name], **self.plugin_settings)
        assert self.plugin_name in config.plugin_configs

    def test_registers_cleanly(self, make_config):
        config = make_config([self.plugin_name], **self.plugin_settings)
        manager = PluginManager(config.plugins())
        assert any(self.plugin_name in manager.implementers(hook) for hook in HOOKS), "implements no hook"

    def test_says_what_it_acts_on(self, make_config):
        config = make_config([self.plugin_name], **self.plugin_settings)
        plugin = PluginManager(config.plugins()).plugins[self.plugin_name]
        assert plugin.activity.strip(), (
            f"{type(plugin).__name__}.activity is empty: say in one line what ctx.acted(n, of=m) counts, read as "
            "'n of m <activity>' (docs/hooks.md, ctx.acted)"
        )

    def test_two_step_training(self, make_config):
        config = make_config([*self.stacked_with, self.plugin_name], **self.plugin_settings)
        recorder = HookRecorder()
        trainer = train_steps(config, steps=2, monitor=recorder)
        assert trainer.state.global_step == 2
        assert any(call.plugin == self.plugin_name for call in recorder.calls), "no hook of the plugin was called"
        metric = f"{ACTIVITY}/{self.plugin_name}"
        logged = [row[metric] for row in trainer.state.log_history if metric in row]
        assert len(logged) == 2, f"{metric} logged at {len(logged)} of 2 steps: report each step with ctx.acted(n, of=m)"
        assert all(0 <= share <= 1 for share in logged), f"{metric}: {logged} is no share"

    def test_refuses_settings_no_run_could_use(self):
        for settings, message in self.refused_settings:
            try:
                make_plugin(self.plugin_name, **settings)
            except ConfigError as error:
                keys = [f"{self.plugin_name}.{key}" for key in settings]
                if not (any(key in str(error) for key in keys) and re.search(message, str(error))):
                    pytest.fail(f"{settings} refused with {str(error)!r}, which names none of {keys} or does not "
                                f"match {message!r}")
            else:
                pytest.fail(f"{settings} not refused: expected a ConfigError matching {message!r}")
