"""Measuring a label-free run: what a method's mechanism test or benchmark reads from one ``stackrl train`` job."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from stackrl.config import load_config
from stackrl.plots import METRICS_FILE
from stackrl.run import train
from stackrl.truth import PREFIX


def label_free_run(recipe: Path, overrides=()) -> dict[str, float]:
    """Train ``recipe`` with ``overrides`` in a scratch folder; held-out pass@1 ``before`` and ``after``, and the
    mean over training of every figure the host logged against the hidden answers (``truth/...``)."""
    with tempfile.TemporaryDirectory() as out:
        result = train(load_config([recipe], [*overrides, f"output_dir={out}"]))
        with open(Path(out) / METRICS_FILE) as metrics:
            logged = [json.loads(line) for line in metrics]
    figures = {label: result["evaluations"][label]["pass@1"] for label in ("before", "after")}
    for key in sorted({k for entry in logged for k in entry if k.startswith(f"{PREFIX}/")}):
        values = [entry[key] for entry in logged if key in entry]
        figures[key] = sum(values) / len(values)
    return figures
