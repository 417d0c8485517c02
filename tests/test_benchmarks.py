"""The host's benchmarks run in a short mode and print the figures the README quotes; their numbers are not tested."""

import re
from pathlib import Path

import torch

from stackrl.testing.repository import load_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def short(*options: str) -> list[str]:
    """One round of two steps, on the threads this test process already uses."""
    return ["--rounds", "1", "--steps", "2", "--warmup", "1", "--threads", str(torch.get_num_threads()), *options]


def figure(output: str, name: str) -> float:
    found = re.search(rf"^{name}: (-?[\d.]+)$", output, re.MULTILINE)
    assert found, f"no '{name}: X' line in:\n{output}"
    return float(found.group(1))


def test_overhead_prints_the_ratio_and_its_spread(capsys):
    load_script(BENCHMARKS / "overhead.py").main(short())
    output = capsys.readouterr().out
    assert figure(output, "overhead_ratio") > 0
    assert re.search(r"^ratio noop/plain  cpu: [\d.]+ +per-round ratios: median", output, re.MULTILINE), output


def test_scaling_prints_the_cost_per_plugin_and_draws_its_plot(tmp_path, capsys):
    plot = tmp_path / "scaling.png"
    options = ["--plugin-counts", "0", "2", "--group-sizes", "4", "--lengths", "16", "--stack-prompts", "1",
               "--stack-length", "16", "--plot", str(plot)]
    load_script(BENCHMARKS / "scaling.py").main(short(*options))
    output = capsys.readouterr().out
    figure(output, "per_plugin_cost")
    assert "stack covo+rlsd+opsd: extra cost" in output
    assert plot.stat().st_size > 0
