"""TRLOO's mechanism on the built-in model, short: on real groups the expected advantage of a completion is its
true advantage (scale 1), where GRPO's self-inclusive baseline gives 1 - 1/N. benchmarks/mechanism.py has the
full measurement and the accuracy runs."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_leave_one_out_advantage_is_unbiased_where_the_self_inclusive_one_shrinks():
    figures = load_script(BENCHMARK).advantage_scale(problems=64, seed=0)
    print(figures)
    assert abs(figures["c_trloo"] - 1) < 0.1, figures
    assert abs(figures["c_grpo_centred"] - figures["one_minus_1/N"]) < 0.1, figures
