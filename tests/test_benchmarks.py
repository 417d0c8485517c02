"""The host's benchmarks run in a short mode and print the figures the README quotes; their numbers are not tested.
The plugins' benchmark scripts share one main (stackrl.testing.benchmark), checked here on a stand-in run. The GPU
check's dry run trains each of its configurations one step on the CPU, so the check a lent GPU runs is known to
start."""

import json
import re
import subprocess
from importlib.metadata import distributions
from pathlib import Path

import torch

from stackrl.testing.repository import load_script, write_metadata

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


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


def test_replay_prints_the_cost_of_the_importance_weights_scoring_pass(capsys):
    load_script(BENCHMARKS / "replay.py").main(short())
    output = capsys.readouterr().out
    assert figure(output, "replay_cost_ratio") > 0 and figure(output, "replay_all_cost_ratio") > 0
    assert re.search(r"^ratio quarter/rollout  cpu: [\d.]+ +per-round ratios: median", output, re.MULTILINE), output


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


def test_the_gpu_check_dry_run_trains_every_configuration_and_says_what_needs_cuda(tmp_path, capsys):
    gpu_check = load_script(BENCHMARKS / "gpu_check.py")
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path)]) == 0
    output = capsys.readouterr().out
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    # bitsandbytes is a dependency: 4-bit + LoRA runs here too, and nothing is skipped
    assert {p: "skipped" in entry for p, entry in result["precisions"].items()} == {"bf16": False, "4bit-lora": False}
    for precision, (preset, names) in gpu_check.PRECISIONS.items():
        configurations = result["precisions"][precision]["configurations"]
        assert list(configurations) == list(names), precision
        for name, figures in configurations.items():
            expected = list(gpu_check.STACK) if name == "stack" else [name] if name in gpu_check.FAMILIES else []
            assert figures["plugins"] == expected
            assert figures["rounds"] == 1 and figures["step_time_s"] > 0 and figures["tokens_per_s"] > 0
            assert figures["peak_gpu_memory_gib"] is None  # no GPU: not measured, and said so
    assert set(gpu_check.FAMILIES) <= set(result["precisions"]["bf16"]["configurations"])
    assert "not measured: peak GPU memory" in output
    assert (tmp_path / "gpu_check.txt").read_text() in output  # the table printed last is the one written


def test_the_gpu_check_scripts_parse():
    for script in ("gpu_check.sh", "gpu_wheels.sh"):
        subprocess.run(["bash", "-n", str(BENCHMARKS / script)], check=True)


def test_a_checkout_is_usable_uninstalled_through_the_metadata_an_installer_would_write(tmp_path):
    assert write_metadata(ROOT, tmp_path) == ROOT / "core"
    assert write_metadata(ROOT / "plugins" / "covo", tmp_path) == ROOT / "plugins" / "covo"
    found = {dist.metadata["Name"]: dist for dist in distributions(path=[str(tmp_path)])}
    assert found["stackrl"].version == "0.1.0"
    assert [(ep.group, ep.name, ep.value) for ep in found["stackrl-covo"].entry_points] == [
        ("stackrl.plugins", "covo", "stackrl_covo:CoVo")
    ]


def test_env_runner_prints_its_overhead_against_generation(tiny_model_dir, capsys):
    load_script(BENCHMARKS / "env_runner.py").main(
        ["--model", str(tiny_model_dir), "--steps", "1", "--rows", "8", "--threads", str(torch.get_num_threads())])
    output = capsys.readouterr().out
    assert figure(output, "env_overhead_ratio") > 0
    assert re.search(r"^rollouts [\d.]+ s, generation [\d.]+ s in \d+ calls, \d+ turns played", output, re.MULTILINE), output


def test_aux_models_prints_the_calls_per_distinct_request_and_the_step_time_ratio(capsys):
    load_script(BENCHMARKS / "aux_models.py").main(["--short"])
    output = capsys.readouterr().out
    assert figure(output, "calls_per_distinct_request") == 1.0
    assert figure(output, "requests_per_call") >= 1.0
    assert figure(output, "aux_judge_time_ratio") > 0


def test_loss_advantages_compares_each_micro_batch_rows_advantages_with_the_wanted_ones():
    from types import SimpleNamespace

    from stackrl.testing.benchmark import LossAdvantages

    rollout = SimpleNamespace(completion_ids=[[1, 2], [3]])
    trainer = SimpleNamespace(_rollouts={"train": rollout}, _compute_loss=lambda model, inputs: "loss")
    check = LossAdvantages(trainer, lambda r: [[1.0, 0.5], [2.0]])
    assert trainer._compute_loss is check
    # row 0 per token (padded to width 3), row 1 one scalar a row; then row 1 wrong
    inputs = {"stackrl_row": torch.tensor([0, 1]), "advantages": torch.tensor([[1.0, 0.5, 9.0], [2.0, 0, 0]])}
    assert check(None, inputs) == "loss"
    check(None, {"stackrl_row": torch.tensor([1]), "advantages": torch.tensor([-2.0])})
    assert dict(check.counts) == {"batches": 1, "rows": 3, "mismatches": 1} and check.notes == [(1, [-2.0], [2.0])]
