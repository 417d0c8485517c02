"""SSRL's reward and information mask in one real step of the built-in model (benchmarks/mechanism.py)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_format_ranks_same_answers_and_the_written_information_gets_no_gradient():
    figures = load_script(BENCHMARK).run(seed=0)
    # Rewards 1.0, 0.9, 0.1, 0.0: the well-formed self-search outranks the malformed one with the same answer,
    # and any right answer outranks any wrong one.
    order = [figures[f"advantage_{kind}"] for kind in
             ("well_formed_right", "malformed_right", "well_formed_wrong", "malformed_wrong")]
    assert order == sorted(order, reverse=True) and len(set(order)) == 4, figures
    assert order[0] - order[1] > 0.05, figures
    assert figures["loss_calls"] >= 1, figures
    # TRL's policy loss has no gradient on the tokens of the information blocks the policy wrote, and has one on
    # every other token of a row with an advantage.
    assert figures["grad_information_max"] == 0.0, figures
    assert figures["grad_own_min"] > 0.0, figures
