"""OSFT's mechanism on the built-in task and model, short: one seed, a few steps of the CPU recipe against its
ablation (sampling at the loss's temperature). The full figures (3 seeds, 30 steps) come from
benchmarks/mechanism.py."""

import math
from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_accuracy_at_temperature_one_rises_without_a_reward_and_not_in_the_ablation(tmp_path):
    mechanism = load_script(BENCHMARK)
    problems, samples = 100, 4
    short = [f"eval.size={problems}", f"eval.samples={samples}", "trainer.disable_tqdm=true"]
    before = mechanism.untrained(tmp_path, short)["pass@1 at 1.0"]
    osft = mechanism.run("osft", seed=0, steps=12, folder=tmp_path, overrides=short)["pass@1"]
    ablation = mechanism.run("ablation", seed=0, steps=12, folder=tmp_path, overrides=short)["pass@1"]
    noise = math.sqrt(before * (1 - before) / (problems * samples))
    print(f"pass@1 before {before:.3f}, osft {osft:.3f}, ablation {ablation:.3f}, noise {noise:.3f}")
    assert osft > before + noise, (before, osft, noise)
    assert osft > ablation + noise, (osft, ablation, noise)
