"""SEAL's mechanism on the built-in model, short: on self-edits the model sampled itself, the reward (the copy's
greedy accuracy after the inner update, less the live policy's) favours the right self-edits. The full figures,
and held-out accuracy after training against plain GRPO, come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_self_edits_whose_update_helps_the_copy_answer_earn_more_than_those_that_break_it():
    figures = load_script(BENCHMARK).reward_by_correctness(problems=32, seed=0)
    print(figures)
    # 128 self-edits, about 60% wrong: the benchmark's gap (about 0.19) is several standard errors of the two means
    assert figures["right"] > figures["wrong"] + 0.08, figures
    assert figures["wrong"] < 0 < figures["nonzero"], figures
