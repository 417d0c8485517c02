"""`stackrl new-plugin`: the generated package installs, is found, passes its own tests and stacks with others."""

import json
import subprocess
import sys

import pytest

from stackrl import StackrlError
from stackrl.cli import main
from stackrl.scaffold import new_plugin
from stackrl.testing.fixtures import train_steps


def pip(*args):
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], check=True)


@pytest.fixture
def generated(tmp_path):
    folder = new_plugin("fresh_method", tmp_path)
    pip("install", "--no-deps", "--no-build-isolation", "-e", str(folder))
    yield folder
    pip("uninstall", "--yes", "stackrl-fresh_method")


def test_generated_plugin_installs_passes_its_tests_and_stacks(generated, make_config, capsys):
    assert main(["plugins", "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed["fresh_method"]["status"] == "ok"
    assert listed["fresh_method"]["hooks"] == ["transform_prompts", "reward", "reshape_advantages", "loss_term", "post_step"]

    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", str(generated / "tests")],
        capture_output=True, text=True, cwd=generated,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr

    trainer = train_steps(make_config(["digit_reward", "fresh_method"]), steps=2)
    assert trainer.state.global_step == 2
    assert "fresh_method/scale" in trainer.state.log_history[0]


def test_new_plugin_refuses_bad_names_and_existing_folders(tmp_path):
    with pytest.raises(StackrlError, match="'Bad-Name' must be a lower-case Python identifier"):
        new_plugin("Bad-Name", tmp_path)
    new_plugin("taken", tmp_path)
    with pytest.raises(StackrlError, match="already exists"):
        new_plugin("taken", tmp_path)
