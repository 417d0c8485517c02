"""A run's metrics as JSONL while it trains, and as PNG plots afterwards (``stackrl plot RUN_DIR``)."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import TrainerCallback

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


# One figure per question a reader asks of a run: which keys answer it.
FIGURES = {
    "rewards": lambda key: key == "reward" or (key.startswith("rewards/") and key.endswith("/mean")),
    "accuracy": lambda key: key.startswith("eval/"),
    "completion_length": lambda key: key in ("completions/mean_length", "completions/mean_terminated_length"),
    "loss": lambda key: key == "loss" or key.startswith("loss/"),
}


def plot_run(run_dir) -> list[Path]:
    """Draw the run's figures from its ``metrics.jsonl`` into ``RUN_DIR/plots``; returns the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    metrics = run_dir / METRICS_FILE
    if not metrics.is_file():
        from stackrl.errors import StackrlError

        raise StackrlError(f"{run_dir}: no {METRICS_FILE}; is this a stackrl run folder?")
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    keys = sorted({k for r in records for k in r if k != "step"})
    out = run_dir / PLOTS_DIR
    out.mkdir(exist_ok=True)
    written = []
    for name, wanted in FIGURES.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for key in filter(wanted, keys):
            steps, values = _series(records, key)
            ax.plot(steps, values, marker="o" if len(steps) < 12 else None, label=key)
        ax.set_xlabel("step")
        ax.set_title(name.replace("_", " "))
        if ax.lines:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "not logged in this run", ha="center", va="center", transform=ax.transAxes)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
