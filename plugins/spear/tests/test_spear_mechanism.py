"""SPEAR on the built-in model, short (the full figures come from benchmarks/mechanism.py): earlier successes are
replayed, reach the loss through the imitation term on their rows only, and the curriculum runs its way."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_replayed_successes_reach_the_loss_through_the_imitation_term_on_their_rows_only():
    figures, replays, history = load_script(BENCHMARK).run(seed=0, steps=8)
    assert replays.replayed, "a problem came back after a row of positive advantage"
    for row in replays.replayed:
        assert row == {"success": True, "earlier_positive": True, "advantage_positive": True}, row
    assert replays.losses, "a micro-batch with replayed rows had an imitation term"
    for loss in replays.losses:
        assert loss["replayed"] is not None and loss["replayed"] > 0, loss  # every replayed row gets a gradient
        assert loss["other"] == 0.0, loss  # no sampled row does
    steps = [row for row in history if "reward_weight/spear" in row]
    tool = [row["reward_weight/spear"] for row in steps]
    assert tool[0] == 1.0 and all(a > b for a, b in zip(tool, tool[1:])), tool  # the tool reward's weight falls
    imitation = [row["spear/imitation_coef"] for row in steps if "spear/imitation_coef" in row]
    assert len(imitation) >= 2 and all(a < b for a, b in zip(imitation, imitation[1:])), imitation  # it rises
