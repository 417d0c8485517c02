"""OSFT's mechanism on the built-in task and model, short: one seed, a few steps of the CPU recipe against its
ablation (sampling at the loss's temperature). The full figures (3 seeds, 30 steps) come from
benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.benchmark import ShortEvaluation
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_accuracy_at_temperature_one_rises_without_a_reward_and_not_in_the_ablation(tmp_path):
    mechanism, evaluation = load_script(BENCHMARK), ShortEvaluation(problems=100, samples=4)
    before = mechanism.untrained(tmp_path, evaluation.overrides)["pass@1 at 1.0"]
    osft, ablation = (mechanism.run(method, seed=0, steps=12, folder=tmp_path, overrides=evaluation.overrides)["pass@1"]
                      for method in ("osft", "ablation"))
    noise = evaluation.noise(before)
    print(f"pass@1 before {before:.3f}, osft {osft:.3f}, ablation {ablation:.3f}, noise {noise:.3f}")
    assert osft > before + noise, (before, osft, noise)
    assert osft > ablation + noise, (osft, ablation, noise)
