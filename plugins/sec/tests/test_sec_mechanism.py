"""SEC's mechanism on the built-in task and model, short: one seed, a few steps of the CPU recipe. The full
figures (3 seeds, 20 steps, against uniform sampling) come from benchmarks/mechanism.py."""

from pathlib import Path

from stackrl.testing.repository import load_script

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
# The built-in model's held-out pass@1 per category (benchmarks/mechanism.py, before training): about 0.9 on the
# easiest, 0.4-0.6 on these two, 0.2 or less on the three with 2-digit operands.
INTERMEDIATE = ["3 steps, 1-digit", "4 steps, 1-digit"]
EXTREMES = ["2 steps, 1-digit", "2 steps, 2-digit", "3 steps, 2-digit", "4 steps, 2-digit"]


def test_draws_drift_to_the_categories_of_intermediate_difficulty(tmp_path):
    mechanism = load_script(BENCHMARK)
    short = ["eval.size=12", "eval.samples=1", "trainer.disable_tqdm=true"]
    sec = mechanism.run("sec", seed=0, steps=6, folder=tmp_path, overrides=short)
    prob = sec["prob"]
    assert sorted(prob) == sorted(INTERMEDIATE + EXTREMES)
    # Eight problems a step make each category's payoff noisy: the two groups are compared as wholes.
    intermediate = sum(prob[c] for c in INTERMEDIATE) / len(INTERMEDIATE)
    extremes = sum(prob[c] for c in EXTREMES) / len(EXTREMES)
    assert intermediate > 1.5 * extremes, prob  # uniform draws would give both 1/6
