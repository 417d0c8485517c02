"""The host's benchmarks run in a short mode and print the figures the README quotes; their numbers are not tested.
The plugins' benchmark scripts share one main (stackrl.testing.benchmark), checked here on a stand-in run."""

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


def test_the_plugins_shared_main_prints_each_run_then_the_means_over_the_seeds(capsys):
    from stackrl.testing.benchmark import arguments, compare

    args = arguments("a benchmark", steps=4, eval_size=16, methods=("plain", "method")).parse_args(
        ["trainer.learning_rate=1e-4", "--seeds", "0", "1", "--methods", "method", "plain"])
    seen = []

    def run(method, seed, folder):
        seen.append((method, seed, folder.is_dir()))
        return {"pass@1": 0.25 * seed + (method == "method"), "closed_at": None, "curve": [1.0, 2.0]}

    results = compare(args, args.methods, run, figures=("pass@1", "closed_at"),
                      before=lambda folder: {"pass@1": 0.5}, number_format="+.3f")
    assert seen == [("method", 0, True), ("plain", 0, True), ("method", 1, True), ("plain", 1, True)]
    assert [r["curve"] for r in results["plain"]] == [[1.0, 2.0]] * 2  # kept, for what a script prints besides
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == ["before training: pass@1 +0.500", "seed 0 method: pass@1 +1.000  closed_at +nan",
                         "seed 0  plain: pass@1 +0.000  closed_at +nan", "seed 1 method: pass@1 +1.250  closed_at +nan",
                         "seed 1  plain: pass@1 +0.250  closed_at +nan"]
    assert lines[6] == ("4 steps, seeds [0, 1], held-out problems 16, overrides ['trainer.learning_rate=1e-4']; "
                        "means over the seeds")
    assert lines[7].split() == ["pass@1", "closed_at"]
    table = {line.split()[0]: line.split()[1:] for line in lines[8:]}
    assert table == {"before": ["+0.500", "+nan"], "method": ["+1.125", "+nan"], "plain": ["+0.125", "+nan"]}
