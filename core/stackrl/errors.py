"""The errors stackrl raises for bad input: each names what is wrong and where."""

from __future__ import annotations

import difflib


class StackrlError(Exception):
    """Base class: a problem with the run's input (config, plugins, data), reported without a traceback by the CLI."""


class ConfigError(StackrlError):
    """A config file or override is invalid."""


class PluginError(StackrlError):
    """A plugin cannot be found, loaded or registered, or it broke its hook's contract."""


class PluginHookError(PluginError):
    """A plugin raised inside a hook; the original exception is the ``__cause__``."""

    def __init__(self, plugin: str, hook: str, step: int | None, error: BaseException):
        where = f" at step {step}" if step is not None else ""
        super().__init__(f"plugin '{plugin}' failed in hook '{hook}'{where}: {type(error).__name__}: {error}")
        self.plugin, self.hook, self.step = plugin, hook, step


def did_you_mean(name: str, choices) -> str:
    """`` Did you mean 'x'?`` for the closest of ``choices``, or an empty string."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""
