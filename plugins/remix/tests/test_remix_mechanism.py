"""ReMix through the real trainer: four steps of the CPU recipe, every micro-batch row checked where TRL's loss
receives it (plugins/remix/benchmarks/mechanism.py): fresh rows with GRPO's advantage, replayed rows with the
log-probs their sampling policy gave them and GRPO's advantage times min(c, pi_now / pi_behaviour), the replayed
share as configured and no row older than remix.max_age. A pool of 8 problems, 8 a batch, and one fresh row in
four: each problem comes back every batch with one row within the age limit of 1 and three older ones, which a rule
without the limit would replay. A truncation just below 1 and a high learning rate make the truncation change
replayed tokens of non-zero advantage (at c = 1 the tiny model's near-certain tokens seldom pass it in four steps).
About 15 s on an idle machine."""

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

SHORT = ["importance.truncation=0.95", "trainer.learning_rate=1.0e-2", "remix.max_age=1", "remix.fresh_share=0.25",
         "data.size=8", "trainer.num_iterations=1"]


def test_replayed_rows_reach_the_loss_truncated_and_fresh_rows_unchanged():
    mechanism = load_script("plugins/remix/benchmarks/mechanism.py")
    found = mechanism.run(seed=0, steps=4, overrides=SHORT)
    assert found.get("mismatches", 0) == 0, found["notes"]
    assert found["loss_rows"] == 4 * 32, "every row of every step was checked in the loss"
    assert found["replayed"] > 0, "nothing was replayed: the check of replay is void"
    assert found["replayed_signal"] > 0, "every replayed row had advantage 0: the check of its weights is void"
    assert found["clipped"] > 0, "no replayed token's ratio passed the truncation: the check of truncation is void"
    assert found["past_limit"] > 0, "no problem came back only past max_age: the check of the age limit is void"
    # Generation: each row the policy sampled, and only those (the replayed ones were not generated again).
    assert found["generated"] == found["fresh_rows"] == 4 * 32 - found["replayed"]
