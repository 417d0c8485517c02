"""``stackrl new-plugin NAME``: a working, tested plugin package to start a method from."""

from __future__ import annotations

import keyword
import re
from importlib.resources import files
from pathlib import Path
from string import Template

from stackrl.errors import StackrlError

# template file -> where it lands in the new plugin's folder
LAYOUT = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "init.py.tmpl": "stackrl_{name}/__init__.py",
    "plugin.py.tmpl": "stackrl_{name}/plugin.py",
    "test_plugin.py.tmpl": "tests/test_{name}.py",
}


def new_plugin(name: str, parent: Path) -> Path:
    """Write ``parent/name``: pyproject with the entry point, the package, a README skeleton and tests."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise StackrlError(f"new-plugin: '{name}' must be a lower-case Python identifier, like 'covo' or 'self_judge'")
    folder = Path(parent) / name
    if folder.exists():
        raise StackrlError(f"new-plugin: {folder} already exists")
    from stackrl import __version__

    values = {
        "name": name,
        "class_name": "".join(part.capitalize() for part in name.split("_")),
        "title": name.replace("_", " ").title(),
        "host_version": __version__,
    }
    templates = files("stackrl") / "template"
    for template, target in LAYOUT.items():
        path = folder / target.format(name=name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(templates.joinpath(template).read_text()).substitute(values))
    return folder
