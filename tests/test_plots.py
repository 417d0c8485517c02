"""What the plots draw, read off the matplotlib figures: series, labels, error bars, titles, legends."""

import json
import math

import matplotlib
import pytest
import yaml

from stackrl.plots import CONFIG_FILE, METRICS_FILE, draw, plot_runs, read_run

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STEPS = range(10, 101, 10)


def write_run(folder, plugins=("sage", "covo"), rewards=None, accuracy=(0.46, 0.74), problems=200, shift=0.0):
    """A run folder as a run writes it: metrics.jsonl (log lines and held-out evaluations) and the resolved config."""
    folder.mkdir(parents=True)
    rows = [{"step": 0, "eval/pass@1": accuracy[0], "eval/maj@4": accuracy[0] + 0.05, "eval/problems": problems}]
    for step in STEPS:
        rows.append({
            "step": step, "loss": 0.01, "reward": 0.6 + shift, "rewards/exact_match/mean": 0.5 + shift,
            "rewards/covo/mean": 0.2, "completions/mean_length": 30.0 + step / 100, "completions/min_length": 20.0,
            "completions/max_length": 40.0, "completions/mean_terminated_length": 30.0 + step / 100,
            "covo/consistency": 0.3, "sage/rescued": 0.1, "sage/hinted": 0.2, "activity/covo": 0.9,
            "activity/sage": 0.25,
        })
    rows.append({"step": STEPS[-1], "eval/pass@1": accuracy[1], "eval/maj@4": accuracy[1] + 0.02,
                 "eval/problems": problems})
    (folder / METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    tree = {"plugins": list(plugins), "rewards": rewards or {"exact_match": 1.0, "covo": 0.5}}
    (folder / CONFIG_FILE).write_text(yaml.safe_dump(tree))
    return folder


@pytest.fixture
def figure():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_rewards_carry_their_weights_and_the_title_names_the_run(tmp_path, figure):
    runs = {"demo": read_run(write_run(tmp_path / "demo", rewards={"exact_match": 1.0, "covo": 0.5}))}
    draw(figure, "rewards", runs)
    assert [line.get_label() for line in figure.lines] == ["reward (weighted sum)", "covo × 0.5", "exact_match × 1.0"]
    assert figure.get_title() == "rewards: demo"


def test_a_component_without_a_configured_weight_says_so(tmp_path, figure):
    runs = {"demo": read_run(write_run(tmp_path / "demo", rewards={"exact_match": 1.0}))}
    draw(figure, "rewards", runs)
    assert "covo × its plugin's default weight" in [line.get_label() for line in figure.lines]


def test_completion_length_is_one_series_in_its_band_from_zero(tmp_path, figure):
    runs = {"demo": read_run(write_run(tmp_path / "demo"))}
    draw(figure, "completion_length", runs)
    assert [line.get_label() for line in figure.lines] == ["completions/mean_length"]
    assert list(figure.lines[0].get_ydata()) == [30.0 + step / 100 for step in STEPS]
    band = figure.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == 20.0 and band[:, 1].max() == 40.0
    assert figure.get_ylim()[0] == 0


def test_held_out_points_carry_their_binomial_standard_error(tmp_path, figure):
    runs = {"demo": read_run(write_run(tmp_path / "demo", accuracy=(0.46, 0.74), problems=200))}
    draw(figure, "accuracy", runs)
    container = next(c for c in figure.containers if c.get_label() == "eval/pass@1")
    data, _, (bars,) = container
    assert list(data.get_ydata()) == [0.46, 0.74]
    half_widths = [(top[1] - bottom[1]) / 2 for bottom, top in bars.get_segments()]
    assert half_widths == pytest.approx([math.sqrt(p * (1 - p) / 200) for p in (0.46, 0.74)])
    assert half_widths[0] == pytest.approx(0.035, abs=0.001)  # the README's "about ±0.03 at 200 problems"
    assert "eval/problems" not in [c.get_label() for c in figure.containers]


def test_plugins_own_figures_and_their_activity_are_drawn(tmp_path, figure):
    run = write_run(tmp_path / "demo")
    assert [p.stem for p in plot_runs([run])] == [
        "rewards", "accuracy", "completion_length", "loss", "activity", "plugin-sage", "plugin-covo"
    ]
    runs = {"demo": read_run(run)}
    draw(figure, "plugin-sage", runs)
    assert [line.get_label() for line in figure.lines] == ["sage/hinted", "sage/rescued"]
    assert figure.get_title() == "sage's own figures: demo"
    plt.cla()
    draw(figure, "activity", runs)
    assert {line.get_label(): list(line.get_ydata())[0] for line in figure.lines} == {
        "activity/covo": 0.9, "activity/sage": 0.25
    }
    assert figure.get_ylim() == (-0.03, 1.03)


def test_an_overlay_keeps_every_point_visible_its_legend_off_the_data_and_its_own_folder(tmp_path):
    runs = [write_run(tmp_path / name, accuracy=(0.46, 0.74)) for name in ("grpo", "covo", "sage")]
    first = plot_runs(runs[:2])
    assert first[0].parent == tmp_path / "comparison-grpo-vs-covo"
    assert plot_runs(runs[1:])[0].parent == tmp_path / "comparison-covo-vs-sage"
    assert first[0].is_file(), "a second comparison leaves the first in place"

    fig, ax = plt.subplots()
    draw(ax, "accuracy", {run.name: read_run(run) for run in runs[:2]})
    pass_at_1 = [c for c in ax.containers if c.get_label().endswith("eval/pass@1")]
    starts = [c[0].get_xdata()[0] for c in pass_at_1]
    assert [c.get_label() for c in pass_at_1] == ["grpo: eval/pass@1", "covo: eval/pass@1"]
    assert starts[0] < 0 < starts[1], "the two runs' step-0 points side by side, not one over the other"
    assert ax.get_title() == "held-out accuracy: grpo, covo"
    fig.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= axes.x1, "the legend sits beside the axes"
    plt.close(fig)
