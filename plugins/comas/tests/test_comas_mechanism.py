"""CoMAS's mechanism on the built-in judging model, short: one step of the CPU recipe on stackrl/arith-skills
(benchmarks/mechanism.py's ``signal``). Critiques that call a wrong solution wrong earn more than those that call it
right, and GRPO raises them; the held-out figures after training come from the benchmark's main."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism


def test_critiques_that_catch_a_wrong_solution_earn_more_and_are_pushed_up(tmp_path):
    benchmark = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py")
    found = benchmark.signal(0, tmp_path, ["comas.critique_share=0.75"])
    assert found["critiques"][(False, False)] >= 4 and found["critiques"][(False, True)] >= 2, found
    assert found["critique_wrong_called_wrong"] > found["critique_wrong_called_right"] + 0.5, found
    assert found["advantage_wrong_called_wrong"] > 0.2, found
