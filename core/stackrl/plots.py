"""A run's metrics as JSONL while it trains, and as PNG plots afterwards (``stackrl plot RUN_DIR [RUN_DIR ...]``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainerCallback

from stackrl.errors import StackrlError

METRICS_FILE = "metrics.jsonl"
PLOTS_DIR = "plots"


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
class Figure:
    """One question a reader asks of a run: the keys that answer it, and what their values measure."""

    title: str
    wanted: Callable[[str], bool]
    ylabel: str
    optional: bool = False  # drawn only where some run logged one of its keys


FIGURES = {
    "rewards": Figure(
        "rewards", lambda key: key == "reward" or (key.startswith("rewards/") and key.endswith("/mean")),
        "mean reward per completion",
    ),
    "accuracy": Figure("held-out accuracy", lambda key: key.startswith("eval/"), "share of problems solved"),
    "completion_length": Figure(
        "completion length", lambda key: key in ("completions/mean_length", "completions/mean_terminated_length"),
        "tokens",
    ),
    "loss": Figure("loss", lambda key: key == "loss" or key.startswith("loss/"), "loss"),
    # Label-free runs whose data has answers: does each reward track correctness (AUROC 0.5 = chance)?
    "truth": Figure("rewards against the hidden answers", lambda key: key.startswith("truth/"), "AUROC, share",
                    optional=True),
    # Supervised phases a plugin ran between RL steps (ctx.supervised_phase): their first and last batch loss.
    "phases": Figure("supervised phases", lambda key: key.startswith("phase/") and "/loss_" in key,
                     "token-mean NLL", optional=True),
}
# Several runs: a colour per run, and per series of a run a line style (a marker shape for points).
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")


def _read_run(run_dir: Path) -> list[dict]:
    metrics = run_dir / METRICS_FILE
    if not metrics.is_file():
        raise StackrlError(f"{run_dir}: no {METRICS_FILE}; is this a stackrl run folder?")
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]


def _distinct_series(records: list[dict], keys: list[str]) -> list[tuple[str, list, list]]:
    """``(label, steps, values)`` per key; keys whose series are identical share one, labelled ``a = b``
    (``reward`` and a run's single reward component)."""
    series: dict[tuple, list[str]] = {}
    for key in keys:
        steps, values = _series(records, key)
        if steps:
            series.setdefault((tuple(steps), tuple(values)), []).append(key)
    return [(" = ".join(names), list(steps), list(values)) for (steps, values), names in series.items()]


def draw(ax, name: str, runs: dict[str, list[dict]]) -> None:
    """Draw the figure ``name`` of ``runs`` (run name -> its metrics records) on the matplotlib axes ``ax``."""
    import matplotlib.pyplot as plt

    figure = FIGURES[name]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for r, (run, records) in enumerate(runs.items()):
        keys = sorted({k for record in records for k in record if k != "step" and figure.wanted(k)})
        for s, (label, steps, values) in enumerate(_distinct_series(records, keys)):
            style = {"marker": "o"} if len(steps) < 12 else {}
            if len(runs) > 1:
                style.update(color=colours[r % len(colours)], linestyle=LINE_STYLES[s % len(LINE_STYLES)])
                label = f"{run}: {label}"
            if name in ("accuracy", "phases"):  # measured at these steps only: no line drawn between them
                style.update(linestyle="none", marker=MARKERS[s % len(MARKERS)])
            ax.plot(steps, values, label=label, **style)
    ax.set_xlabel("step")
    ax.set_ylabel(figure.ylabel)
    ax.set_title(figure.title)
    if ax.lines:
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "not logged in this run", ha="center", va="center", transform=ax.transAxes)


def plot_runs(run_dirs, out=None) -> list[Path]:
    """Draw the figures of one run, or of several runs overlaid on the same axes (a colour per run), from their
    ``metrics.jsonl``. Written to ``out``, by default ``RUN_DIR/plots`` for one run and ``comparison`` in the
    runs' common folder for several; returns the PNG paths.

    Held-out accuracy and supervised phases are drawn as points: they are measured only at those steps. An optional
    figure (the rewards against hidden answers, supervised phases) is drawn only where some run logged it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dirs = [Path(d) for d in run_dirs]
    runs = {d.name: _read_run(d) for d in run_dirs}
    if len(runs) < len(run_dirs):
        raise StackrlError(f"runs to compare need distinct folder names: {', '.join(map(str, run_dirs))}")
    if out is None:
        common = Path(os.path.commonpath([d.resolve() for d in run_dirs]))
        out = run_dirs[0] / PLOTS_DIR if len(run_dirs) == 1 else common / "comparison"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, figure in FIGURES.items():
        logged = {key for records in runs.values() for record in records for key in record}
        if figure.optional and not any(figure.wanted(key) for key in logged):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5))
        draw(ax, name, runs)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
