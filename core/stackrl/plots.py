"""A run's metrics as JSONL while it trains, and as PNG plots afterwards (``stackrl plot RUN_DIR [RUN_DIR ...]``)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from transformers import TrainerCallback

from stackrl.errors import StackrlError

METRICS_FILE = "metrics.jsonl"
PLOTS_DIR = "plots"
CONFIG_FILE = "stackrl_config.yaml"  # the run's resolved config, written next to its metrics
EVAL_PROBLEMS = "eval/problems"  # logged with each held-out evaluation: the number of problems it measured
ACTIVITY = "activity"  # activity/<plugin>: the share of what a plugin could act on that it did act on


def append_metrics(run_dir, record: dict) -> None:
    with open(Path(run_dir) / METRICS_FILE, "a") as f:
        f.write(json.dumps(record) + "\n")


class MetricsFile(TrainerCallback):
    """Appends every training log line to ``metrics.jsonl`` in the run folder (main process only)."""

    def __init__(self, run_dir):
        self.run_dir = run_dir

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            append_metrics(self.run_dir, {"step": state.global_step, **logs})


def _series(records: list[dict], key: str) -> tuple[list, list]:
    points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
    return [s for s, _ in points], [v for _, v in points]


@dataclass
class Run:
    """A run folder's log lines, and what its config says that the log does not: plugins and reward weights."""

    records: list[dict]
    plugins: list[str] = field(default_factory=list)
    reward_weights: dict = field(default_factory=dict)  # component -> weight or schedule, as the config gives it


@dataclass
class Figure:
    """One question a reader asks of a run: the keys that answer it, and what their values measure."""

    title: str
    wanted: Callable[[str], bool]
    ylabel: str
    optional: bool = False  # drawn only where some run logged one of its keys
    points: bool = False  # measured at these steps only: drawn as points, no line between them
    ylim: tuple | None = None


_LENGTH = "completions/mean_length"
FIGURES = {
    "rewards": Figure(
        "rewards", lambda key: key == "reward" or (key.startswith("rewards/") and key.endswith("/mean")),
        "mean reward per completion",
    ),
    "accuracy": Figure("held-out accuracy", lambda key: key.startswith("eval/") and key != EVAL_PROBLEMS,
                       "share of problems solved", points=True),
    # The mean over a band from the shortest to the longest completion, from 0: a token more is no swing.
    "completion_length": Figure("completion length", lambda key: key == _LENGTH, "tokens"),
    "loss": Figure("loss", lambda key: key == "loss" or key.startswith("loss/"), "loss"),
    # Label-free runs whose data has answers: does each reward track correctness (AUROC 0.5 = chance)?
    "truth": Figure("rewards against the hidden answers", lambda key: key.startswith("truth/"), "AUROC, share",
                    optional=True),
    # Supervised phases a plugin ran between RL steps (ctx.supervised_phase): their first and last batch loss.
    "phases": Figure("supervised phases", lambda key: key.startswith("phase/") and "/loss_" in key,
                     "token-mean NLL", optional=True, points=True),
    # Each plugin's share of what it could act on that it did act on, per step.
    "activity": Figure("plugin activity", lambda key: key.startswith(f"{ACTIVITY}/"), "share acted on",
                       optional=True, ylim=(-0.03, 1.03)),
}
# Several runs: a colour per run, and per series of a run a line style (a marker shape for points).
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")
DODGE = 0.012  # several runs' points at one step sit this share of the step axis apart, none hiding another


def plugin_figures(runs: dict[str, Run]) -> dict[str, Figure]:
    """A figure per plugin of the runs, of what it logs under its own name (``covo/consistency``, ``sage/...``)."""
    names = dict.fromkeys(name for run in runs.values() for name in run.plugins)
    return {
        f"plugin-{name}": Figure(f"{name}'s own figures", lambda key, n=name: key.startswith(f"{n}/"), name,
                                 optional=True)
        for name in names
    }


def read_run(run_dir: Path) -> Run:
    metrics = run_dir / METRICS_FILE
    if not metrics.is_file():
        raise StackrlError(f"{run_dir}: no {METRICS_FILE}; is this a stackrl run folder?")
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    config = run_dir / CONFIG_FILE
    tree = yaml.safe_load(config.read_text()) if config.is_file() else {}
    return Run(records, list(tree.get("plugins") or []), dict(tree.get("rewards") or {}))


def _distinct_series(records: list[dict], keys: list[str]) -> list[tuple[list[str], list, list]]:
    """``(keys, steps, values)`` per distinct series; keys whose series are identical share one (``reward`` and
    a run's single reward component)."""
    series: dict[tuple, list[str]] = {}
    for key in keys:
        steps, values = _series(records, key)
        if steps:
            series.setdefault((tuple(steps), tuple(values)), []).append(key)
    return [(names, list(steps), list(values)) for (steps, values), names in series.items()]


def _label(key: str, run: Run) -> str:
    """A series' name in the legend; a reward component carries its weight, so the total reads as their sum."""
    if key == "reward":
        return "reward (weighted sum)"
    if key.startswith("rewards/") and key.endswith("/mean"):
        component = key.removeprefix("rewards/").removesuffix("/mean")
        weight = run.reward_weights.get(component)
        return f"{component} × {weight}" if weight is not None else f"{component} × its plugin's default weight"
    return key


def _standard_errors(records: list[dict], key: str) -> list[float] | None:
    """The binomial standard error of each held-out share, from the number of problems it was measured on."""
    points = [r for r in records if isinstance(r.get(key), (int, float))]
    if not all(r.get(EVAL_PROBLEMS) for r in points):
        return None
    return [math.sqrt(r[key] * (1 - r[key]) / r[EVAL_PROBLEMS]) for r in points]


def draw(ax, name: str, runs: dict[str, Run]) -> None:
    """Draw the figure ``name`` of ``runs`` (run name -> :class:`Run`) on the matplotlib axes ``ax``."""
    import matplotlib.pyplot as plt

    figure = {**FIGURES, **plugin_figures(runs)}[name]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    every_step = [r["step"] for run in runs.values() for r in run.records]
    span = max(every_step, default=0) - min(every_step, default=0) or 1
    for r, (run_name, run) in enumerate(runs.items()):
        records = run.records
        keys = sorted({k for record in records for k in record if k != "step" and figure.wanted(k)})
        for s, (names, steps, values) in enumerate(_distinct_series(records, keys)):
            label = " = ".join(_label(key, run) for key in names)
            style = {"marker": "o"} if len(steps) < 12 else {}
            if len(runs) > 1:
                style.update(color=colours[r % len(colours)], linestyle=LINE_STYLES[s % len(LINE_STYLES)])
                label = f"{run_name}: {label}"
            if figure.points:
                style.update(linestyle="none", marker=MARKERS[s % len(MARKERS)], capsize=3)
                offset = (r - (len(runs) - 1) / 2) * DODGE * span
                errors = _standard_errors(records, names[0]) if name == "accuracy" else None
                ax.errorbar([step + offset for step in steps], values, yerr=errors, label=label, **style)
                continue
            (line,) = ax.plot(steps, values, label=label, **style)
            if name == "completion_length":
                low, high = _series(records, "completions/min_length"), _series(records, "completions/max_length")
                if low[0] == steps and high[0] == steps:
                    ax.fill_between(steps, low[1], high[1], color=line.get_color(), alpha=0.15,
                                    label=f"{run_name}: shortest to longest" if len(runs) > 1 else "shortest to longest")
    ax.set_xlabel("step")
    ax.set_ylabel(figure.ylabel)
    ax.set_title(f"{figure.title}: {', '.join(runs)}")
    if figure.ylim:
        ax.set_ylim(*figure.ylim)
    elif name == "completion_length":
        ax.set_ylim(bottom=0)
    if ax.lines or ax.containers:
        # Beside the axes, never over the data.
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    else:
        ax.text(0.5, 0.5, "not logged in this run", ha="center", va="center", transform=ax.transAxes)


def plot_runs(run_dirs, out=None) -> list[Path]:
    """Draw the figures of one run, or of several runs overlaid on the same axes (a colour per run), from their
    ``metrics.jsonl``. Written to ``out``, by default ``RUN_DIR/plots`` for one run and ``comparison`` in the
    runs' common folder for several; returns the PNG paths.

    Held-out accuracy and supervised phases are drawn as points: they are measured only at those steps; held-out
    shares carry their binomial standard error. An optional figure (the rewards against hidden answers, supervised
    phases, plugin activity, each plugin's own figures) is drawn only where some run logged it. Several runs go to
    a folder named after them, so that one comparison never replaces another.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dirs = [Path(d) for d in run_dirs]
    runs = {d.name: read_run(d) for d in run_dirs}
    if len(runs) < len(run_dirs):
        raise StackrlError(f"runs to compare need distinct folder names: {', '.join(map(str, run_dirs))}")
    if out is None:
        common = Path(os.path.commonpath([d.resolve() for d in run_dirs]))
        out = run_dirs[0] / PLOTS_DIR if len(run_dirs) == 1 else common / f"comparison-{'-vs-'.join(runs)}"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    logged = {key for run in runs.values() for record in run.records for key in record}
    for name, figure in {**FIGURES, **plugin_figures(runs)}.items():
        if figure.optional and not any(figure.wanted(key) for key in logged):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5))
        draw(ax, name, runs)
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")  # "tight": the legend beside the axes is kept
        plt.close(fig)
        written.append(path)
    return written
