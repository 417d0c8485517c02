"""Finding, loading, registering and calling plugins.

Installed plugins are entry points in the group ``stackrl.plugins``; only those a config names are imported.
Each run builds its own :class:`PluginManager` over plugin instances in config order; there is no global one.
The manager calls hook implementations itself, one plugin at a time in config order, so that chained hooks can
pass values along, exclusive hooks call only their winner, and any exception is reported with the plugin's
name, the hook and the step.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable

import pluggy

from stackrl import hookspecs
from stackrl.errors import PluginError, PluginHookError, did_you_mean
from stackrl.plugin import Plugin

ENTRY_POINT_GROUP = "stackrl.plugins"
HOOKS = {
    name: inspect.signature(fn)
    for name, fn in vars(hookspecs).items()
    if inspect.isfunction(fn) and hasattr(fn, f"{hookspecs.PROJECT}_spec")
}
EXCLUSIVE_HOOKS = tuple(name for name, fn in vars(hookspecs).items() if name in HOOKS and fn.stackrl_spec["firstresult"])

# The stage of a training step each hook belongs to (the lifecycle and checkpoint hooks belong to none).
STAGES = {
    "sample": ("transform_prompts", "generate_rollout"),
    "reward": ("reward",),
    "advantage": ("estimate_advantages", "reshape_advantages", "clip_range"),
    "distill": ("loss_term",),
    "post-step": ("post_step",),
}

Monitor = Callable[[str, str, dict, Any], None]


@dataclass(frozen=True)
class InstalledPlugin:
    """An installed plugin as its entry point describes it, before anything is imported."""

    name: str
    distribution: str
    version: str
    entry_point: EntryPoint

    def load(self) -> type[Plugin]:
        """Import the plugin's class; a failure names the plugin and its distribution."""
        try:
            cls = self.entry_point.load()
        except Exception as exc:
            raise PluginError(
                f"plugin '{self.name}' ({self.distribution} {self.version}) failed to import: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not (inspect.isclass(cls) and issubclass(cls, Plugin)):
            raise PluginError(
                f"plugin '{self.name}': entry point {self.entry_point.value} must name a subclass of "
                f"stackrl.Plugin, not {cls!r}"
            )
        return cls


def installed_plugins() -> dict[str, InstalledPlugin]:
    """Every plugin installed in this environment, by name, without importing any."""
    found = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        found[ep.name] = InstalledPlugin(
            ep.name, dist.name if dist else "?", dist.version if dist else "?", ep
        )
    return dict(sorted(found.items()))


def find_plugin(name: str, installed: dict[str, InstalledPlugin], where: str = "") -> InstalledPlugin:
    """The installed plugin called ``name``, or an error with a did-you-mean and the installed list."""
    if name in installed:
        return installed[name]
    listing = ", ".join(installed) or "none"
    where = f" in {where}" if where else ""
    raise PluginError(f"unknown plugin '{name}'{where}.{did_you_mean(name, installed)} Installed: {listing}")


def _source_root(plugin: Plugin) -> str | None:
    """The file or folder holding the plugin's code: its top-level package, or its module when it has none."""
    top = sys.modules.get(type(plugin).__module__.split(".")[0])
    path = getattr(top, "__file__", None)
    if path is None:
        return None
    return os.path.dirname(path) if hasattr(top, "__path__") else path


def plugin_frame(plugin: Plugin, error: BaseException) -> str | None:
    """``path:line in function`` of the innermost frame of ``error``'s traceback inside the plugin's own code."""
    root = _source_root(plugin)
    if root is None:
        return None
    frames = traceback.extract_tb(error.__traceback__)
    mine = [f for f in frames if f.filename == root or f.filename.startswith(root + os.sep)]
    if not mine:
        return None
    frame = mine[-1]
    path = os.path.relpath(frame.filename)
    path = frame.filename if path.startswith("..") else path
    return f"{path}:{frame.lineno} in {frame.name}"


class PluginManager:
    """The plugins of one run, in config order, with their hook implementations checked against the specs."""

    def __init__(self, plugins: list[Plugin], exclusive: dict[str, str] | None = None, monitor: Monitor | None = None):
        self._pluggy = pluggy.PluginManager(hookspecs.PROJECT)
        self._pluggy.add_hookspecs(hookspecs)
        self.plugins = {p.name: p for p in plugins}
        self.monitor = monitor
        impls: dict[str, list[tuple[str, Callable, tuple[str, ...]]]] = {hook: [] for hook in HOOKS}
        for plugin in plugins:
            for hook, method in self._hook_methods(plugin):
                impls[hook].append((plugin.name, method, tuple(inspect.signature(method).parameters)))
        # pluggy calls the last registered first; registering in reverse keeps its own order equal to ours.
        for plugin in reversed(plugins):
            self._pluggy.register(plugin, name=plugin.name)
        self._impls = self._resolve_exclusive(impls, exclusive or {})

    def _hook_methods(self, plugin: Plugin):
        for attr in dir(plugin):
            opts = self._pluggy.parse_hookimpl_opts(plugin, attr)
            if opts is None:
                continue
            if attr not in HOOKS:
                raise PluginError(
                    f"plugin '{plugin.name}': '{attr}' is marked @hookimpl but is not a hook."
                    f"{did_you_mean(attr, HOOKS)} Hooks: {', '.join(HOOKS)}"
                )
            used = [flag for flag in ("tryfirst", "trylast", "wrapper", "hookwrapper") if opts.get(flag)]
            if used:
                raise PluginError(
                    f"plugin '{plugin.name}': hook '{attr}' uses {used[0]}; call order is the order of the "
                    "config's plugins list"
                )
            method = getattr(plugin, attr)
            spec = HOOKS[attr]
            for arg in inspect.signature(method).parameters:
                if arg not in spec.parameters:
                    raise PluginError(
                        f"plugin '{plugin.name}': hook '{attr}' has unknown argument '{arg}'."
                        f"{did_you_mean(arg, spec.parameters)} The spec is {attr}{spec}"
                    )
            yield attr, method

    def _resolve_exclusive(self, impls, exclusive: dict[str, str]):
        for hook, winner in exclusive.items():
            if hook not in EXCLUSIVE_HOOKS:
                raise PluginError(
                    f"exclusive.{hook}: not an exclusive hook.{did_you_mean(hook, EXCLUSIVE_HOOKS)} "
                    f"Exclusive hooks: {', '.join(EXCLUSIVE_HOOKS)}"
                )
            claimants = [name for name, _, _ in impls[hook]]
            if winner not in claimants:
                raise PluginError(
                    f"exclusive.{hook}: plugin '{winner}' does not implement {hook}; "
                    f"it is implemented by: {', '.join(claimants) or 'no plugin'}"
                )
            impls[hook] = [impl for impl in impls[hook] if impl[0] == winner]
        for hook in EXCLUSIVE_HOOKS:
            claimants = [name for name, _, _ in impls[hook]]
            if len(claimants) > 1:
                raise PluginError(
                    f"plugins {' and '.join(repr(c) for c in claimants)} both implement the exclusive hook "
                    f"'{hook}'; choose one in the config with exclusive.{hook}: <plugin>"
                )
        return impls

    # -- introspection ------------------------------------------------------------------------------------------

    def has(self, hook: str) -> bool:
        return bool(self._impls[hook])

    def stages(self, plugin: str) -> list[str]:
        """The stages ``plugin`` acts in, in step order."""
        return [stage for stage, hooks in STAGES.items() if any(plugin in self.implementers(h) for h in hooks)]

    def implementers(self, hook: str) -> list[str]:
        """The plugins whose implementation of ``hook`` will be called, in call order."""
        return [name for name, _, _ in self._impls[hook]]

    # -- calling --------------------------------------------------------------------------------------------------

    def _call(self, plugin: str, hook: str, method: Callable, argnames, kwargs: dict):
        ctx = kwargs.get("ctx")
        if ctx is not None:
            ctx._plugin = plugin  # so that ctx.log files metrics under this plugin's name
        try:
            result = method(**{a: kwargs[a] for a in argnames})
        except Exception as exc:
            frame = plugin_frame(self.plugins[plugin], exc)
            raise PluginHookError(plugin, hook, getattr(ctx, "step", None), exc, frame) from exc
        if self.monitor is not None:
            self.monitor(hook, plugin, kwargs, result)
        return result

    def each(self, hook: str, **kwargs) -> list[tuple[str, Any]]:
        """Call every implementation in config order; return ``(plugin, result)`` pairs."""
        return [(name, self._call(name, hook, fn, args, kwargs)) for name, fn, args in self._impls[hook]]

    def chain(self, hook: str, value_arg: str, value, check: Callable[[str, Any], Any] | None = None, **kwargs):
        """Fold ``value`` through the implementations in config order; ``None`` keeps the value as it was.

        ``check(plugin, result)`` validates each result and returns the value to pass on.
        """
        for name, fn, args in self._impls[hook]:
            result = self._call(name, hook, fn, args, {value_arg: value, **kwargs})
            if result is not None:
                value = check(name, result) if check else result
        return value

    def call_one(self, plugin: str, hook: str, **kwargs):
        """Call one plugin's implementation of ``hook``."""
        for name, fn, args in self._impls[hook]:
            if name == plugin:
                return self._call(name, hook, fn, args, kwargs)
        raise PluginError(f"plugin '{plugin}' does not implement '{hook}'")

    def exclusive(self, hook: str, **kwargs) -> tuple[str | None, Any]:
        """Call the one implementation of an exclusive hook: ``(plugin, result)``, or ``(None, None)``."""
        for name, fn, args in self._impls[hook]:
            return name, self._call(name, hook, fn, args, kwargs)
        return None, None

