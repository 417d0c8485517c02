"""What a run shows of itself: samples.jsonl and `stackrl samples`, TensorBoard, held-out evaluation during
training, and plots of one run or several overlaid.

``logged`` trains the test plugins that change what samples.jsonl records (a prompt transform, a reward plugin,
per-token advantages, a loss term) with ``report_to: tensorboard``. ``evaluated`` is the whole `stackrl train` job
twice on the same seed, once evaluating every 2 steps and once only before and after.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from stackrl.cli import main
from stackrl.config import load_config
from stackrl.errors import ConfigError
from stackrl.plots import METRICS_FILE, draw, read_run
from stackrl.rewards import exact_match
from stackrl.samples import SAMPLES_FILE
from stackrl.testing.fixtures import train_steps
from stackrl.testing.tiny import TINY_TRAINER, tiny_config

ROOT = Path(__file__).resolve().parent.parent
STEPS, GROUP, GROUPS = 2, 4, 3
WEIGHTS = {"exact_match": 1.0, "digit_reward": 0.5}
SUFFIX = " Answer:"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def logged(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("logged")
    config = tiny_config(
        tiny_model_dir,
        ["prompt_suffix", "digit_reward", "token_decay", "logp_loss"],
        tmp_dir=folder,
        rewards=WEIGHTS,
        prompt_suffix={"suffix": SUFFIX},
        log_samples=2,
        output_dir=str(folder / "run"),
        trainer={"per_device_train_batch_size": GROUP * GROUPS, "num_generations": GROUP, "max_steps": STEPS,
                 "report_to": "tensorboard"},
    )
    train_steps(config)
    return Path(config.host.output_dir)


def test_samples_hold_whole_groups_with_every_reward_and_advantage(logged):
    run = logged
    samples = _records(run / SAMPLES_FILE)
    assert [r["step"] for r in samples] == [step for step in range(1, STEPS + 1) for _ in range(2 * GROUP)]
    for step in range(1, STEPS + 1):
        rows = [r for r in samples if r["step"] == step]
        assert [r["group"] for r in rows] == [0] * GROUP + [1] * GROUP
        for group in (rows[:GROUP], rows[GROUP:]):
            assert len({r["prompt"] for r in group}) == 1
            total = []
            for r in group:
                digits = sum(ch.isdigit() for ch in r["completion"]) / max(1, len(r["completion"]))
                assert r["rewards"] == pytest.approx({"exact_match": exact_match(r["completion"], r["answer"]),
                                                      "digit_reward": digits}, abs=1e-6)
                assert r["reward"] == pytest.approx(sum(WEIGHTS[k] * v for k, v in r["rewards"].items()), abs=1e-6)
                assert r["trained_prompt"] == r["prompt"] + SUFFIX  # what the plugin made of it, as trained on
                total.append(r["reward"])
            # GRPO's advantage of each completion in its group (token_decay keeps it on the first token) ...
            total = torch.tensor(total)
            grpo = (total - total.mean()) / (total.std() + 1e-4)
            assert [r["token_advantages"][0] for r in group] == pytest.approx(grpo.tolist(), abs=1e-4)
            for r in group:  # ... and the advantage per token, whose mean is shown
                tokens = r["token_advantages"]
                assert 0 < len(tokens) <= TINY_TRAINER["max_completion_length"]
                assert r["advantage"] == pytest.approx(sum(tokens) / len(tokens), abs=1e-5)


def test_samples_command_prints_a_step(logged, capsys):
    run = logged
    assert main(["samples", str(run), "--step", "1"]) == 0
    out = capsys.readouterr().out
    first = _records(run / SAMPLES_FILE)[0]
    assert "step 1, group 0" in out and "step 1, group 1" in out and "step 2" not in out
    assert first["prompt"].strip() in out and "trained on:" in out and "digit_reward" in out
    assert f"{first['advantage']:.3f}" in out

    assert main(["samples", str(run), "--step", "7"]) == 2
    assert "no samples of step 7; steps written: 1, 2" in capsys.readouterr().err


def test_tensorboard_gets_every_reward_component_and_loss_term(logged):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = logged
    events = sorted((run / "runs").glob("*/events.out.tfevents.*"))
    assert events, "no TensorBoard event file"
    board = EventAccumulator(str(events[0].parent))
    board.Reload()
    logged_lines = [r for r in _records(run / METRICS_FILE) if "loss" in r]
    for key in ["reward", "rewards/exact_match/mean", "rewards/digit_reward/mean", "loss", "loss/logp_loss"]:
        scalars = board.Scalars(f"train/{key}")
        assert [s.step for s in scalars] == [r["step"] for r in logged_lines]
        assert [s.value for s in scalars] == pytest.approx([r[key] for r in logged_lines], rel=1e-5)


@pytest.fixture(scope="module")
def evaluated(tiny_model_dir, tmp_path_factory):
    from stackrl.run import train

    folder = tmp_path_factory.mktemp("evaluated")
    runs = {}
    for name, every in (("every-2", 2), ("ends-only", 0)):
        config = tiny_config(
            tiny_model_dir, tmp_dir=folder / name, output_dir=str(folder / "runs" / name),
            eval={"size": 8, "samples": 2, "batch_size": 8, "every_steps": every}, trainer={"max_steps": 4},
        )
        runs[name] = (Path(config.host.output_dir), train(config))
    return runs


def test_eval_every_steps_measures_during_training_without_changing_it(evaluated):
    evaluations = evaluated["every-2"][1]["evaluations"]
    assert list(evaluations) == ["before", "step 2", "after"]  # step 4 is "after", once
    records = {name: _records(run / METRICS_FILE) for name, (run, _) in evaluated.items()}
    assert [r["step"] for r in records["every-2"] if "eval/pass@1" in r] == [0, 2, 4]
    assert [r["step"] for r in records["ends-only"] if "eval/pass@1" in r] == [0, 4]
    assert [r["eval/pass@1"] for r in records["every-2"] if r["step"] == 2 and "eval/pass@1" in r] == [
        evaluations["step 2"]["pass@1"]
    ]
    # Every step is still logged, with the same numbers: evaluating leaves the training's random streams alone.
    training = {name: [(r["step"], r["loss"], r["reward"]) for r in rs if "loss" in r] for name, rs in records.items()}
    assert [step for step, _, _ in training["every-2"]] == [1, 2, 3, 4]
    assert training["every-2"] == training["ends-only"]


def test_plot_overlays_runs_with_a_legend_of_run_names(evaluated, capsys):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folders = [run for run, _ in evaluated.values()]
    assert main(["plot", *map(str, folders)]) == 0
    comparison = folders[0].parent / "comparison-every-2-vs-ends-only"
    assert capsys.readouterr().out.split() == [str(comparison / f"{n}.png") for n in
                                               ("rewards", "accuracy", "completion_length", "loss")]
    assert all((comparison / f"{n}.png").stat().st_size > 1000 for n in ("rewards", "accuracy"))

    runs = {run.name: read_run(run) for run in folders}
    fig, ax = plt.subplots()
    draw(ax, "rewards", runs)
    # One line per run: the total reward and the single component are the same series.
    assert [line.get_label() for line in ax.lines] == [
        "every-2: reward (weighted sum) = exact_match × 1.0", "ends-only: reward (weighted sum) = exact_match × 1.0"
    ]
    assert ax.lines[0].get_color() != ax.lines[1].get_color()
    assert ax.get_ylabel() and [t.get_text() for t in ax.get_legend().get_texts()][0].startswith("every-2: ")
    plt.close(fig)

    fig, ax = plt.subplots()
    draw(ax, "accuracy", runs)
    # by run (pass@1 may share its points with maj@k, where the two are equal); each run's points a little aside
    pass_at_1 = {c.get_label().split(": ")[0]: c[0] for c in ax.containers if "eval/pass@1" in c.get_label()}
    assert [round(x) for x in pass_at_1["every-2"].get_xdata()] == [0, 2, 4]
    assert [round(x) for x in pass_at_1["ends-only"].get_xdata()] == [0, 4]
    assert pass_at_1["every-2"].get_xdata()[0] < pass_at_1["ends-only"].get_xdata()[0]
    assert pass_at_1["every-2"].get_color() != pass_at_1["ends-only"].get_color()
    for container in ax.containers:  # points where measured, no line drawn between them
        assert container[0].get_linestyle() == "None" and container[0].get_marker() != "None"
    plt.close(fig)


def test_negative_every_steps_or_log_samples_is_refused(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match=r"eval.every_steps must be 0 \(off\) or a positive number, not -1"):
        tiny_config(tiny_model_dir, tmp_dir=tmp_path, eval={"every_steps": -1})
    with pytest.raises(ConfigError, match="log_samples must be 0"):
        tiny_config(tiny_model_dir, tmp_dir=tmp_path, log_samples=-2)


def test_readme_says_what_a_run_writes(logged):
    readme = (ROOT / "README.md").read_text()
    start = readme.index("### What a run writes\n")
    section = readme[start : readme.index("\n### ", start)]
    written = {key for record in _records(logged / SAMPLES_FILE) for key in record}
    assert {key for key in written if f"`{key}`" not in section} == set()  # every field samples.jsonl holds
    # The comparison: the recipes it trains, stacked on the demo, differ only in the reward; the plot command
    # overlays their two run folders.
    commands = re.findall(r"^stackrl train (\S+) (\S+)$", section, re.MULTILINE)
    configs = [load_config([ROOT / base, ROOT / recipe]) for base, recipe in commands]
    assert len(configs) == 2
    trees = [config.tree for config in configs]
    assert {key for key in {*trees[0], *trees[1]} if trees[0].get(key) != trees[1].get(key)} == {
        "plugins", "rewards", "covo", "output_dir"
    }
    assert all(config.host.eval.every_steps > 0 for config in configs)
    plot = re.search(r"^stackrl plot (\S+) (\S+) ", section, re.MULTILINE)
    assert list(plot.groups()) == [config.host.output_dir for config in configs]
