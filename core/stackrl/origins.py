"""Where each key of a stacked config was set, so that an error about a key names the file (or "command line").

Checks that span keys run on the merged config, where the layer a value came from is gone. They raise errors that
name their keys in full (``model.quantization needs model.lora``, ``covo.max_steps must be ...``); the host then
prefixes each such error with the file (or "command line") that set the keys it names.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

from omegaconf import DictConfig, OmegaConf

from stackrl.errors import StackrlError

_KEY = re.compile(r"\w+(?:\.\w+)*")


def _keys(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        yield f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _keys(value, f"{prefix}{key}.")


class KeyOrigins:
    """Each key (and each section) of a stacked config, mapped to the last layer that set it."""

    def __init__(self, layers: list[tuple[str, DictConfig]]):
        self.layers = [where for where, _ in layers]
        self._where: dict[str, str] = {}
        for where, layer in layers:
            for key in _keys(OmegaConf.to_container(layer, resolve=False)):
                self._where[key] = where

    def of(self, key: str) -> str | None:
        """The file (or "command line") that set ``key``, or None where it holds its default."""
        return self._where.get(key)

    def name(self, message: str) -> str:
        """``message`` prefixed with where the keys it names were set.

        Full keys (``section.key``) count first; a message naming none counts the sections it names. Keys from
        several layers are each named with their layer; a message naming no key that any layer set names every
        layer, since the mistake is in what they leave out.
        """
        named = [k for k in dict.fromkeys(_KEY.findall(message)) if k in self._where]
        keys = [k for k in named if "." in k] or named
        places: dict[str, list[str]] = {}
        for key in keys:
            places.setdefault(self._where[key], []).append(key)
        if not places:
            where = ", ".join(self.layers)
        elif len(places) == 1:
            where = next(iter(places))
        else:
            where = ", ".join(f"{layer} ({', '.join(keys)})" for layer, keys in places.items())
        return f"{where}: {message}"

    @contextmanager
    def naming(self):
        """Within this block, a stackrl error gets the layers of the keys it names in front of its message."""
        try:
            yield
        except StackrlError as exc:
            exc.args = (self.name(str(exc)),)
            raise
