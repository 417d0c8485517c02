"""The plugins of a stackrl checkout: what ``plugins/*`` declares, their CPU recipe settings, their scripts, and
the host's test plugins in ``tests/fixture_plugins``."""

from __future__ import annotations

import atexit
import configparser
import importlib.util
import os
import shutil
import sys
import tempfile
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
    (``configs/recipes/<name>-cpu.yaml``) sets for it: ``settings`` (its section), ``reward`` (its weight or None)
    and ``stacked`` (the other plugins it runs beside, such as ``env``).
    """
    from stackrl.manager import installed_plugins

    installed = installed_plugins()
    found = {}
    for name in plugin_folders(root):
        if name not in installed:
            continue
        recipe = Path(root) / "configs" / "recipes" / f"{name}-cpu.yaml"
        tree = yaml.safe_load(recipe.read_text()) if recipe.is_file() else {}
        found[name] = {
            "settings": tree.get(name) or {},
            "reward": (tree.get("rewards") or {}).get(name),
            "stacked": [plugin for plugin in tree.get("plugins") or [] if plugin != name],
        }
    return found


def load_script(path: Path):
    """A script of the checkout (a plugin's ``benchmarks/*.py``, a test helper) as a module, for a test to call."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"{path.parent.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def use_fixture_plugins(root: Path) -> None:
    """Make the host's test plugins (``root/tests/fixture_plugins``) importable and found by entry point, in this
    process and in every process it starts, without installing them: a user's ``stackrl plugins`` never lists them.
    """
    use_projects([Path(root) / "tests" / "fixture_plugins"])


def use_projects(projects: list[Path]) -> None:
    """Make the distributions of the project folders ``projects`` (each with a ``pyproject.toml``: the host's root,
    a plugin folder) importable and found by entry point, in this process and in every process it starts, without
    installing them (a machine with no build tools or index, or test plugins a user never sees).

    Each project's metadata (name, version, entry points) is written to a temporary folder, the way an installer
    would, and that folder and the projects' code folders go on ``sys.path`` and ``PYTHONPATH``.
    """
    site = Path(tempfile.mkdtemp(prefix="stackrl-projects-"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    paths = [*(str(write_metadata(Path(project).resolve(), site)) for project in projects), str(site)]
    sys.path.extend(paths)
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])


def write_metadata(project: Path, site: Path) -> Path:
    """Write the ``.dist-info`` folder of the distribution ``project/pyproject.toml`` declares into ``site``;
    returns the folder its code is imported from (setuptools' ``packages.find.where``, else the project)."""
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    declared = pyproject["project"]
    info = site / f"{declared['name'].replace('-', '_')}-{declared['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {declared['name']}\nVersion: {declared['version']}\n"
    )
    entry_points = configparser.ConfigParser(interpolation=None)
    entry_points.optionxform = str  # entry-point names are case-sensitive
    entry_points.read_dict(declared.get("entry-points", {}))
    with open(info / "entry_points.txt", "w") as f:
        entry_points.write(f)
    found = pyproject.get("tool", {}).get("setuptools", {}).get("packages", {})
    where = found.get("find", {}).get("where", ["."]) if isinstance(found, dict) else ["."]
    return project / where[0]
