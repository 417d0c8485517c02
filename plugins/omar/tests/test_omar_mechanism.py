"""OMAR on the built-in model, short: one real step of the CPU recipe (stackrl/arith-games in all three seats of
the public-goods game), every row's per-token advantages checked where TRL's loss receives them against the
turn-then-token split computed by hand in benchmarks/mechanism.py (the seat-return figures come from its main)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_loss_receives_each_seats_turn_advantages_shared_over_the_turns_tokens():
    # one prompt: a group of 12 rows, 4 episodes of 3 seats
    figures = load_script(BENCHMARK).run(seed=0, steps=1, overrides=["trainer.per_device_train_batch_size=12"])
    assert figures["batches"] == 1 and figures["rows"] == 12, figures
    assert figures.get("mismatches", 0) == 0, figures["notes"]
    # the check has something to tell apart: rows whose turns got different credit, over many action tokens
    assert figures["turn_spread_rows"] >= 3 and figures["action_tokens"] > 100, figures
