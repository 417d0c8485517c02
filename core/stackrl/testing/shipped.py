"""Checks of a shipped built-in model against its record (``stackrl_pretrain.json``) and its README: what the tests
of arith-skills, arith-roles and arith-code share."""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["assert_made_by", "readme_rows", "record"]


def record(folder: Path) -> dict:
    """The record the script that made the checkpoint in ``folder`` wrote beside it."""
    from stackrl.tasks.pretrain import RECORD_FILE

    return json.loads((folder / RECORD_FILE).read_text())


def assert_made_by(folder: Path, module: str, recipe: tuple[str, ...] | None, init: Path | None) -> None:
    """That the checkpoint in ``folder`` is what the current ``python -m <module>`` makes: its recorded recipe hash
    is the current one of ``recipe`` (``None``: arith-tiny's and arith-skills'), its starting weights are ``init``'s,
    and every flag of the command its README gives (but ``--out`` and ``--init``) is the recorded setting."""
    from stackrl.tasks.pretrain import file_hash, recipe_hash

    made = record(folder)
    assert made["recipe_sha256"] == recipe_hash(recipe), f"the recipe changed: remake {folder.name} (README.md)"
    if init is not None:
        assert made["init_sha256"] == file_hash(init / "model.safetensors")
    readme = (folder / "README.md").read_text().replace("\\\n", " ")
    command = re.search(rf"python -m {re.escape(module)} (.+?)\n", readme).group(1)
    for flag, value in re.findall(r"--([a-z-]+) (\S+)", command):
        if flag not in ("out", "init"):
            assert str(made["settings"][flag.replace("-", "_")]) == value, flag


def readme_rows(folder: Path, name: str) -> list[list[float]]:
    """The numbers of each table row of the README in ``folder`` that starts with ``name``, in order."""
    rows = re.findall(rf"^\| {re.escape(name)} \|(.+)\|$", (folder / "README.md").read_text(), re.MULTILINE)
    assert rows, f"no README row for {name}"
    return [[float(cell) for cell in row.split("|")] for row in rows]
