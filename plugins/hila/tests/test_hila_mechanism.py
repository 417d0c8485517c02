"""HILA on the built-in model: the cost of deferring moves how often the trained policy defers. Three steps of the
CPU recipe at a low cost (0.1) and at a high one (0.9), the supervised phase left out; each policy then checks the
same held-out attempts (the untrained policy's own) four times each, and the low-cost policy defers far more often."""

from pathlib import Path

import pytest
import torch

from stackrl.testing.repository import load_script

MECHANISM = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py")

pytestmark = pytest.mark.mechanism

SHORT = ["hila.every=1000", "trainer.learning_rate=1e-3", "trainer.per_device_train_batch_size=32"]


def test_a_cheaper_deferral_is_taken_more_often(tmp_path):
    torch.set_num_threads(1)
    attempts = MECHANISM.heldout_attempts(48)
    low, high = (MECHANISM.run(method, 0, tmp_path, steps=3, attempts=attempts, samples=4, overrides=SHORT)
                 for method in ("low", "high"))
    assert low["deferred"] > high["deferred"] + 0.15, (low, high)
