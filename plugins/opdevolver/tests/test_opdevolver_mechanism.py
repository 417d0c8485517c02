"""OPD-Evolver's mechanism on the built-in model, from two real steps (benchmarks/mechanism.py's run)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


@pytest.fixture(scope="module")
def figures():
    return load_script(BENCHMARK).run(seed=0, steps=2)


def test_attribution_is_calibrated_by_the_rows_without_the_record(figures):
    """A correct trial of another question is harmful memory (the model copies its answer): its with/without gap
    is negative although every row that read it had a correct trial in view; the question's own trial helps."""
    assert figures["attributions"] >= 16, figures
    assert figures["gap_same"] > 0.3, figures
    assert figures["gap_other"] < -0.1, figures


def test_the_student_sees_no_memory_and_the_teacher_sees_the_hindsight(figures):
    assert figures["distilled"] >= 16, figures
    assert figures["memory_in_student"] == 0.0, figures
    assert figures["hindsight_in_teacher"] == 1.0, figures


def test_the_hindsight_teacher_lifts_right_completions_above_wrong_ones(figures):
    """On rows whose teacher saw no memory, the teacher's lift over the student (mean token log-prob) is higher on
    a right completion than on a wrong one: the distillation pulls toward right answers."""
    assert figures["lift_right"] - figures["lift_wrong"] > 0.5, figures
