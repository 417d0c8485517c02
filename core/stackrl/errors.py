"""The errors stackrl raises for bad input: each names what is wrong and where."""

from __future__ import annotations

import difflib
from contextlib import contextmanager


class StackrlError(Exception):
    """Base class: a problem with the run's input (config, plugins, data), reported without a traceback by the CLI."""


class ConfigError(StackrlError):
    """A config file or override is invalid."""


class ConfigErrors(ConfigError):
    """Several mistakes found in one pass over a config; ``errors`` holds each, in the order found."""

    def __init__(self, errors: list[StackrlError]):
        super().__init__("\n".join(str(error) for error in errors))
        self.errors = errors


class Mistakes:
    """Collects the errors of checks that do not depend on one another, so that one pass reports them all.

    ``name`` turns each message into the one reported (the host prefixes the file that set the keys it names); a
    check that collects its own errors leaves the naming to the outermost collector.
    """

    def __init__(self, name=lambda message: message):
        self.errors: list[StackrlError] = []
        self._name = name

    @contextmanager
    def check(self):
        """Run one check: a stackrl error it raises is kept, and the next check runs."""
        try:
            yield
        except StackrlError as exc:
            for error in exc.errors if isinstance(exc, ConfigErrors) else [exc]:
                error.args = (self._name(str(error)),)
                self.errors.append(error)

    def raise_any(self) -> None:
        """Raise what the checks found: the one error, or all of them together."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(self.errors)


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
