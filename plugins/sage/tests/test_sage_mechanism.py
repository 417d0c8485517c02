"""SAGE's mechanism on the built-in task and model, short: one seed, a few steps of the CPU recipe against plain
GRPO. The full figures (3 seeds, 20 steps) come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.benchmark import ShortEvaluation
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_more_groups_carry_a_signal_and_no_hint_accuracy_holds(tmp_path):
    mechanism, evaluation = load_script(BENCHMARK), ShortEvaluation(problems=64, samples=4)
    grpo, sage = (mechanism.run(method, seed=0, steps=5, folder=tmp_path, overrides=evaluation.overrides)
                  for method in ("grpo", "sage"))
    assert sage["signal"] > grpo["signal"] + 0.1, (sage, grpo)
    # Five small steps barely move either model: "not lower" up to the sampling noise of the held-out figure.
    noise = evaluation.noise(grpo["pass@1"])
    assert sage["pass@1"] >= grpo["pass@1"] - noise, (sage, grpo, noise)
