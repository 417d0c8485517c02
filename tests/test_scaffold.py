"""`stackrl new-plugin`: the generated package installs, is found, passes its own tests and stacks with others."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stackrl import StackrlError
from stackrl.scaffold import new_plugin
from stackrl.testing.tiny import TINY_TRAINER


@pytest.fixture
def generated(tmp_path):
    """The generated plugin and the environment of a process that finds it installed.

    pip installs it into a folder of its own on ``PYTHONPATH``, not into this environment: the tests running
    alongside in other processes must not find a plugin they do not expect."""
    folder = new_plugin("fresh_method", tmp_path)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "--quiet", "install", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(folder)], check=True)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return folder, {**os.environ, "PYTHONPATH": path}


def run(*args, cwd=None, env=None):
    """A command in a fresh interpreter: only a new process sees a package installed after this one started."""
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def test_generated_plugin_installs_passes_its_tests_and_stacks(generated, tiny_model_dir, tmp_path):
    generated, env = generated
    listed = {row["name"]: row for row in json.loads(run("-m", "stackrl.cli", "plugins", "--json", env=env))}
    assert listed["fresh_method"]["status"] == "ok"
    assert listed["fresh_method"]["hooks"] == ["transform_prompts", "reward", "reshape_advantages", "loss_term", "post_step"]

    run("-m", "pytest", "-q", "-p", "no:warnings", str(generated / "tests"), cwd=generated, env=env)

    # Stacked after a method plugin of this repository, through the command users run.
    config = tmp_path / "stacked.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"name_or_path": str(tiny_model_dir)},
        "data": {"size": 8},
        "plugins": ["opsd", "fresh_method"],
        "rewards": {"exact_match": 1.0},
        "trainer": {**TINY_TRAINER, "max_steps": 2},
        "eval": {"before_and_after": False},
        "output_dir": str(tmp_path / "run"),
    }))
    run("-m", "stackrl.cli", "train", str(config), env=env)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "fresh_method/scale" in m] == [1, 2]
    assert all("loss/opsd" in m for m in metrics if "fresh_method/scale" in m)


def test_new_plugin_refuses_bad_names_and_existing_folders(tmp_path):
    with pytest.raises(StackrlError, match="'Bad-Name' must be a lower-case Python identifier"):
        new_plugin("Bad-Name", tmp_path)
    new_plugin("taken", tmp_path)
    with pytest.raises(StackrlError, match="already exists"):
        new_plugin("taken", tmp_path)


def relative_links(readme: Path) -> list[str]:
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", readme.read_text()) if not re.match(r"[a-z]+://", t)]


def test_generated_readme_links_resolve_where_the_plugin_lives(tmp_path):
    # Outside a stackrl checkout: no link into one.
    outside = new_plugin("elsewhere", tmp_path)
    assert relative_links(outside / "README.md") == []
    assert "stackrl's hook reference" in (outside / "README.md").read_text()
    # Inside one (here a copy of its layout), however deep: links relative to the plugin.
    checkout = tmp_path / "checkout"
    for path in ("README.md", "docs/hooks.md", "core/stackrl/__init__.py"):
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).write_text("")
    for parent in (checkout / "plugins", checkout / "more" / "nested"):
        readme = new_plugin("inside", parent) / "README.md"
        links = relative_links(readme)
        assert len(links) == 2 and all((readme.parent / link).resolve().is_file() for link in links), links


def test_the_next_line_says_what_make_test_needs_and_which_pip(tmp_path, monkeypatch, capsys):
    from stackrl.cli import main

    checkout = tmp_path / "checkout"
    for path in ("README.md", "docs/hooks.md", "docs/plugins.md", "core/stackrl/__init__.py"):
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).write_text("")
    monkeypatch.chdir(checkout)
    assert main(["new-plugin", "my_method"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "wrote plugins/my_method",
        "next: .venv/bin/pip install -e plugins/my_method && .venv/bin/python -m pytest plugins/my_method",
        "then: add a row for my_method to docs/plugins.md (make test fails until it is there; CONTRIBUTING.md, "
        '"The plugin directory")',
    ]
    # Outside a checkout there is no .venv of the project's, nor a plugin directory.
    monkeypatch.chdir(tmp_path)
    assert main(["new-plugin", "elsewhere", "--dir", "."]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["next: pip install -e elsewhere && python -m pytest elsewhere"]


def test_the_generated_readme_lists_no_file_it_did_not_write(tmp_path):
    folder = new_plugin("listed", tmp_path)
    readme = (folder / "README.md").read_text()
    filled_in = re.sub(r"<[^>]*>", "", readme)  # placeholders say what the author is to write
    named = re.findall(r"`([\w./-]+\.(?:yaml|py|toml|md))`", filled_in)
    assert [path for path in named if not (folder / path).exists()] == []
