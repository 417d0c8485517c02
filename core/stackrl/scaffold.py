"""``stackrl new-plugin NAME``: a working, tested plugin package to start a method from."""

from __future__ import annotations

import keyword
import os
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


def _checkout_root(folder: Path) -> Path | None:
    """The stackrl checkout that ``folder`` lies in, if any."""
    for parent in folder.resolve().parents:
        if (parent / "core" / "stackrl" / "__init__.py").is_file() and (parent / "docs" / "hooks.md").is_file():
            return parent
    return None


def _references(folder: Path) -> dict[str, str]:
    """How the plugin's README names stackrl and its hook reference: links relative to the plugin inside a stackrl
    checkout; plain names elsewhere, where a path into a checkout would resolve for no reader."""
    root = _checkout_root(folder)
    if root is None:
        return {"stackrl": "stackrl", "hook_reference": "stackrl's hook reference, `docs/hooks.md` in its repository,"}
    return {
        "stackrl": f"[stackrl]({os.path.relpath(root / 'README.md', folder)})",
        "hook_reference": f"[the hook reference]({os.path.relpath(root / 'docs' / 'hooks.md', folder)})",
    }


def next_steps(folder: Path) -> str:
    """What to run after ``new-plugin``: in a stackrl checkout, with its ``.venv`` as CONTRIBUTING says, and the
    plugin directory's row that ``make test`` requires; elsewhere, with the ``pip`` and ``python`` at hand."""
    root = _checkout_root(folder)
    if root is None:
        return f"pip install -e {folder} && python -m pytest {folder}"
    venv = os.path.relpath(root / ".venv" / "bin")
    directory = os.path.relpath(root / "docs" / "plugins.md")
    return (
        f"{venv}/pip install -e {folder} && {venv}/python -m pytest {folder}\n"
        f"then: add a row for {folder.name} to {directory} (make test fails until it is there; CONTRIBUTING.md, "
        "\"The plugin directory\")"
    )


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
        **_references(folder),
    }
    templates = files("stackrl") / "template"
    for template, target in LAYOUT.items():
        path = folder / target.format(name=name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(templates.joinpath(template).read_text()).substitute(values))
    return folder
