"""beta-OPSD's mechanism on the built-in model, short: one seed, eight steps (half the recipe's batch, three times its
learning rate) at beta 1 (plain OPSD's target, the teacher alone) and beta 4 (a quarter of the way from the
reference to the teacher). The full figures come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
SHORT = ["trainer.per_device_train_batch_size=16", "trainer.learning_rate=3.0e-4"]


def test_a_larger_beta_keeps_the_trained_policy_nearer_the_initial_one():
    mechanism = load_script(BENCHMARK)
    teacher_only = mechanism.run(beta=1.0, seed=0, steps=8, heldout=32, overrides=SHORT)
    anchored = mechanism.run(beta=4.0, seed=0, steps=8, heldout=32, overrides=SHORT)
    # Measured: 0.041 against 0.112. A target that ignored beta, or moved toward the teacher as beta grows, would
    # not bring it below 0.6 of plain OPSD's.
    assert anchored["kl_initial"] < 0.6 * teacher_only["kl_initial"], (teacher_only, anchored)
