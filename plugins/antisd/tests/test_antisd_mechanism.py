"""AntiSD's gate on the built-in task and model, short: one seed, a few steps of the CPU recipe. The full curves
(3 seeds, 30 steps, against GRPO) come from benchmarks/mechanism.py."""

import math
from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_gate_closes_when_the_teachers_entropy_falls_below_its_threshold_and_the_term_stops():
    result = load_script(BENCHMARK).run("antisd", seed=0, steps=6)
    closed = result["closed_at"]
    below = [step for step, value in enumerate(result["smoothed"]) if value is not None and value < result["limit"]]
    assert closed is not None and below and closed == below[0], result
    assert all(term is not None and term <= math.log(2) / 2 for term in result["term"][:closed]), result
    assert all(term is None for term in result["term"][closed:]), "the term goes on after the gate closed"
    assert all(value is None for value in result["entropy"][closed + 1 :]), "a latched gate stops measuring"
