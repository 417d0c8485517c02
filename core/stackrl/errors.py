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
    """A plugin raised inside a hook; the original exception is the ``__cause__``.

    ``frame`` is the plugin's own line closest to the failure (``path:line in function``), when there is one.
    """

    def __init__(self, plugin: str, hook: str, step: int | None, error: BaseException, frame: str | None = None):
        where = f" at step {step}" if step is not None else ""
        message = f"plugin '{plugin}' failed in hook '{hook}'{where}: {type(error).__name__}: {error}"
        super().__init__(f"{message}\n  at {frame}" if frame else message)
        self.plugin, self.hook, self.step, self.frame = plugin, hook, step, frame


class TrainingInterrupted(KeyboardInterrupt):
    """Training was stopped with Ctrl-C at ``step``; ``checkpoint`` is the run's last checkpoint, or ``None``."""

    def __init__(self, step: int, checkpoint: str | None):
        super().__init__(f"interrupted at step {step}")
        self.step, self.checkpoint = step, checkpoint


def did_you_mean(name: str, choices) -> str:
    """`` Did you mean 'x'?`` for the closest of ``choices``, or an empty string."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""
