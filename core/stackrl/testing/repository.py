"""The method plugins of a stackrl checkout: what ``plugins/*`` declares, their CPU recipe settings, their scripts."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import yaml


def plugin_folders(root: Path) -> dict[str, Path]:
    """Entry-point name -> folder, for every plugin distribution under ``root/plugins``."""
    found = {}
    for pyproject in sorted(Path(root).glob("plugins/*/pyproject.toml")):
        entry_points = tomllib.loads(pyproject.read_text()).get("project", {}).get("entry-points", {})
        for name in entry_points.get("stackrl.plugins", {}):
            found[name] = pyproject.parent
    return found


def method_plugins(root: Path) -> dict[str, dict]:
    """Each installed method plugin under ``root/plugins``, with what its CPU recipe
    (``configs/recipes/<name>-cpu.yaml``) sets for it: ``settings`` (its section) and ``reward`` (its weight or None).
    """
    from stackrl.manager import installed_plugins

    installed = installed_plugins()
    found = {}
    for name in plugin_folders(root):
        if name not in installed:
            continue
        recipe = Path(root) / "configs" / "recipes" / f"{name}-cpu.yaml"
        tree = yaml.safe_load(recipe.read_text()) if recipe.is_file() else {}
        found[name] = {"settings": tree.get(name) or {}, "reward": (tree.get("rewards") or {}).get(name)}
    return found


def load_script(path: Path):
    """A script of the checkout (a plugin's ``benchmarks/*.py``, a test helper) as a module, for a test to call."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"{path.parent.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
