"""LANPO's contexts on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""

import math
from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_rows_are_shown_their_own_newest_trial_or_the_most_related_one_and_no_reward_reaches_a_context():
    figures, contexts = load_script(BENCHMARK).run(seed=0, steps=6)
    assert contexts.faults == [], contexts.faults
    # Both kinds of context were written and trained on, and the rows' rewards reached the update.
    assert figures["reflected"] > 0 and figures["abstracted"] > 0, figures
    assert not math.isnan(figures["reflect_accuracy"]) and figures["plain_accuracy"] > 0, figures
