"""SEC's mechanism on the built-in task and model, short: one seed, a few steps of the CPU recipe. The full
figures (3 seeds, 20 steps, against uniform sampling) come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
# The built-in model's held-out pass@1 before training (benchmarks/mechanism.py): 0.69 on this category, where
# groups often split, and 0.10 on the hardest, where nearly every group fails alike.
INTERMEDIATE, HARDEST = "3 steps, 1-digit", "4 steps, 2-digit"


def test_draws_leave_the_hardest_category_for_one_of_intermediate_difficulty(tmp_path):
    mechanism = load_script(BENCHMARK)
    short = ["eval.size=12", "eval.samples=1", "trainer.disable_tqdm=true"]
    prob = mechanism.run("sec", seed=0, steps=6, folder=tmp_path, overrides=short)["prob"]
    assert len(prob) == 6
    # Uniform draws give each category 1/6; eight problems a step make the other categories' values noisy.
    assert prob[HARDEST] < 1 / 6 < prob[INTERMEDIATE], prob
