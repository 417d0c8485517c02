"""TRIAGE on the built-in model, short (the full figures come from benchmarks/mechanism.py): inside a row, the
line the host finds wrong gets a lower advantage than the row's right first line, and a right line written again
a lower one than its first writing."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_wrong_and_repeated_lines_get_less_credit_than_right_new_lines_of_their_row():
    figures, lines = load_script(BENCHMARK).run(seed=0, steps=2, repeats=8)
    assert figures["labeller_calls"] > 0, figures  # the labels came from the aux model, backend rule
    assert figures["wrong_rows"] >= 5 and figures["repeats"] >= 5, figures
    assert figures["wrong_below_right"] == 1.0, lines.wrong_vs_right
    assert figures["repeat_below_first"] == 1.0, lines.repeat_vs_first
    # The outcome stays the direction: a row whose lines are all right and new moves by the progress constant only.
    assert lines.outcome_kept and max(lines.outcome_kept) == pytest.approx(0.1, abs=1e-4), lines.outcome_kept
