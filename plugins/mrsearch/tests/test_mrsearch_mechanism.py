"""MR-Search on the built-in model, short: one real step of the CPU recipe (stackrl/arith-tools, two attempts at
each lookup question with the search tool, a rule reflection between them), every row's per-token advantages
checked where TRL's loss receives them against the attempt-level credit computed by hand in
benchmarks/mechanism.py, and every second attempt checked to follow the reflection on the first (the accuracy
figures against plain GRPO come from its main)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_loss_receives_each_attempts_relative_credit_and_the_next_attempt_sees_the_reflection():
    # one batch of 8 prompts x 8 rows, sampled at 0.7 so that some first attempts are right (seed 1: 4 of 64)
    figures = load_script(BENCHMARK).run(seed=1, steps=1, overrides=["trainer.temperature=0.7"])
    assert figures["batches"] == 1 and figures["rows"] == 64, figures
    assert figures.get("mismatches", 0) == 0, figures["notes"]
    # the check has something to tell apart: rows credited against their group's same attempt
    assert figures["credited_rows"] >= 8, figures
    # the reflection on attempt 1 stands in the context of attempt 2, in every row that reached it
    assert figures["second_attempts"] >= 32 and figures.get("reflections_missing", 0) == 0, figures
    assert figures["reflections_shown"] == figures["second_attempts"], figures
