"""What a user's environment shows: only real plugins, in aligned columns; none of the dependencies' known noise;
torch threads suited to a CPU run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stackrl import ConfigError
from stackrl.cli import main
from stackrl.cpu import available_cpus
from stackrl.testing.repository import plugin_folders

ROOT = Path(__file__).resolve().parents[1]


def without_test_plugins() -> dict[str, str]:
    """The environment of a user's shell in the set-up's .venv: the test plugins' folders are not on the path."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_set_up_environment_lists_the_method_plugins_and_no_test_plugin():
    done = subprocess.run([sys.executable, "-m", "stackrl.cli", "plugins", "--json"], capture_output=True, text=True,
                          env=without_test_plugins(), check=True)
    listed = {row["name"]: row["status"] for row in json.loads(done.stdout)}
    extra = sorted(set(listed) - set(plugin_folders(ROOT)))
    assert extra == [], (
        f"plugins installed outside plugins/: {extra}; the test plugins are found during tests only "
        "(conftest.py), never installed (pip uninstall stackrl-test-plugins)"
    )
    assert listed == {name: "ok" for name in plugin_folders(ROOT)}


def test_tests_and_the_processes_they_start_see_the_test_plugins():
    done = subprocess.run([sys.executable, "-m", "stackrl.cli", "plugins", "--json"], capture_output=True, text=True,
                          check=True)
    assert {"digit_reward", "noop", "not_importable"} <= {row["name"] for row in json.loads(done.stdout)}


def test_plugin_listing_aligns_its_columns(capsys):
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 3
    starts = {tuple(m.start() for m in re.finditer(r"(?<=  )\S", line))[:3] for line in lines}
    assert len(starts) == 1, lines  # distribution, version and hooks start at the same column on every line


def test_test_kit_drops_the_known_noise_and_shows_real_warnings(pytester):
    pytester.makepyfile(
        """
        import logging
        import warnings

        def test_noise():
            warnings.warn("`gradient_checkpointing` is deprecated and will be removed in v6. Use ...", FutureWarning)
            warnings.warn("`torch.jit.script_method` is deprecated. Please switch to ...", DeprecationWarning)
            warnings.warn("a real one", FutureWarning)
            bnb = logging.getLogger("bitsandbytes.backends.cpu.ops")
            bnb.warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s.", "no kernels")
            bnb.warning("a real record")
            assert False
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # a fresh process loads the test kit
    output = result.stdout.str()
    assert result.parseoutcomes()["warnings"] == 1 and "a real one" in output
    logged = output.split("Captured log call")[1].split("=====")[0]
    assert "a real record" in logged and "gemm_4bit_forward" not in logged


@pytest.fixture
def torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_cpu_runs_use_the_configured_threads_or_one_per_cpu(make_config, tmp_path, monkeypatch, torch_threads):
    make_config([], eval={"before_and_after": False})  # writes tmp_path/tiny.yaml
    run = ["train", str(tmp_path / "tiny.yaml")]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(3)
    assert main([*run, "threads=1", "--overwrite"]) == 0
    assert torch.get_num_threads() == 1
    assert main([*run, "--overwrite"]) == 0
    assert torch.get_num_threads() == available_cpus()
    # OMP_NUM_THREADS, which torch read when it started, stands when the config sets none.
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    torch.set_num_threads(3)
    assert main([*run, "--overwrite"]) == 0
    assert torch.get_num_threads() == 3


def test_threads_must_be_positive(make_config):
    with pytest.raises(ConfigError, match="threads must be at least 1"):
        make_config([], threads=0)


def test_available_cpus_follow_the_cgroup_quota(tmp_path):
    cpus = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    assert available_cpus(cpu_max) == cpus  # no file: no quota
    cpu_max.write_text("max 100000\n")
    assert available_cpus(cpu_max) == cpus
    cpu_max.write_text("50000 100000\n")  # half a CPU: one thread
    assert available_cpus(cpu_max) == 1
    cpu_max.write_text(f"{100000 * (cpus + 4)} 100000\n")  # a quota above the CPUs it may run on
    assert available_cpus(cpu_max) == cpus


def test_importing_stackrl_bounds_idle_spinning_unless_told_otherwise():
    read = [sys.executable, "-c", "import os, stackrl; print(os.environ.get('GOMP_SPINCOUNT'))"]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}

    def spin_count(**chosen):
        return subprocess.run(read, capture_output=True, text=True, env={**env, **chosen}, check=True).stdout.strip()

    assert spin_count() == "100000"
    assert spin_count(GOMP_SPINCOUNT="5") == "5"
    assert spin_count(OMP_WAIT_POLICY="PASSIVE") == "None"
