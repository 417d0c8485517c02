"""SAGE's mechanism on the built-in task and model, short: one seed, a few steps of the CPU recipe against plain
GRPO. The full figures (3 seeds, 20 steps) come from benchmarks/mechanism.py."""

import math
from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_more_groups_carry_a_signal_and_no_hint_accuracy_holds(tmp_path):
    mechanism = load_script(BENCHMARK)
    problems, samples = 64, 4
    short = [f"eval.size={problems}", f"eval.samples={samples}", "trainer.disable_tqdm=true"]
    grpo = mechanism.run("grpo", seed=0, steps=5, folder=tmp_path, overrides=short)
    sage = mechanism.run("sage", seed=0, steps=5, folder=tmp_path, overrides=short)
    assert sage["signal"] > grpo["signal"] + 0.1, (sage, grpo)
    # Five small steps barely move either model: "not lower" up to the sampling noise of the held-out figure.
    p = grpo["pass@1"]
    noise = math.sqrt(p * (1 - p) / (problems * samples))
    assert sage["pass@1"] >= p - noise, (sage, grpo, noise)
