"""Every distribution (the host and each plugin) builds a wheel and an sdist; the wheels, installed for real (not
editable) into a fresh environment, list their plugins and train.

The fresh environment reuses this one's third-party packages through a ``.pth`` file over a folder of links that
leaves out every stackrl distribution, so nothing is downloaded and only the built wheels provide stackrl.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stackrl.noise import KNOWN_LOG_RECORDS
from stackrl.testing.repository import plugin_folders

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = [ROOT, *sorted(set(plugin_folders(ROOT).values()))]


def run(*cmd, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def own_distribution(entry: Path) -> bool:
    """A site-packages entry of stackrl or of one of its plugins, installed or editable."""
    return entry.name.lower().startswith(("stackrl", "__editable__"))


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """Wheels and sdists of every distribution, built offline with this environment's setuptools, one per core at a
    time."""
    out = tmp_path_factory.mktemp("dist")
    build = lambda project: run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, project)  # noqa: E731
    with ThreadPoolExecutor(os.cpu_count()) as builds:
        list(builds.map(build, PROJECTS))  # raises the first failed build's error
    return out


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, dist) -> Path:
    """A new virtual environment with the built wheels installed; returns its bin folder."""
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    third_party = venv / "third-party"
    third_party.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not own_distribution(entry):
            (third_party / entry.name).symlink_to(entry)
    (site / "third-party.pth").write_text(f"{third_party}\n")
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", *sorted(dist.glob("*.whl")))
    run(python, "-m", "pip", "check")  # every wheel's requirements are met
    return venv / "bin"


def user_env() -> dict[str, str]:
    """The environment of a user's shell: offline, without the test plugins this session makes visible."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "HF_HUB_OFFLINE": "1"}


def test_each_distribution_builds_a_wheel_and_an_sdist(dist):
    for project in PROJECTS:
        name = tomllib.loads((project / "pyproject.toml").read_text())["project"]["name"].replace("-", "_")
        assert len(list(dist.glob(f"{name}-*.whl"))) == 1, f"no wheel of {project}"
        assert len(list(dist.glob(f"{name}-*.tar.gz"))) == 1, f"no sdist of {project}"


def test_installed_wheels_list_the_plugins_and_train(fresh, tmp_path):
    # stackrl and every plugin come from the wheels, not from this checkout.
    modules = ["stackrl", *(f"stackrl_{name}" for name in plugin_folders(ROOT))]
    code = f"import {', '.join(modules)}; print({', '.join(m + '.__file__' for m in modules)})"
    where = run(fresh / "python", "-c", code, env=user_env(), cwd=tmp_path).stdout
    assert str(ROOT) not in where and where.count(str(fresh.parent)) == len(modules), where

    listed = json.loads(run(fresh / "stackrl", "plugins", "--json", env=user_env(), cwd=tmp_path).stdout)
    assert {row["name"]: row["status"] for row in listed} == {name: "ok" for name in plugin_folders(ROOT)}

    # Two steps of a plugin's recipe, on the built-in model and task that the host's wheel carries.
    quick = ["trainer.max_steps=2", "trainer.per_device_train_batch_size=8", "data.size=8",
             "eval.before_and_after=false", "trainer.disable_tqdm=true", f"output_dir={tmp_path / 'run'}"]
    trained = run(fresh / "stackrl", "train", ROOT / "configs" / "recipes" / "covo-cpu.yaml", *quick,
                  env=user_env(), cwd=tmp_path)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "rewards/covo/mean" in m] == [1, 2]
    # The command prints none of the dependencies' known noise.
    assert "is deprecated and will be removed in v6" not in trained.stderr
    assert not any(message in trained.stderr for message in KNOWN_LOG_RECORDS.values())

    # The templates of `stackrl new-plugin` are in the wheel too.
    run(fresh / "stackrl", "new-plugin", "probe", "--dir", tmp_path, env=user_env(), cwd=tmp_path)
    assert (tmp_path / "probe" / "stackrl_probe" / "plugin.py").is_file()
