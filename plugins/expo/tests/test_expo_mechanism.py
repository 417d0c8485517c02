"""What the built-in model's self-explanations are worth, short: 40 held-out hard problems (the full figures come
from benchmarks/mechanism.py)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_last_step_makes_the_model_reach_the_answer_it_is_shown_and_the_answer_alone_does_not():
    pytest.importorskip("stackrl_rrpo", reason="the benchmark checks each line with rrpo's oracle")
    results = load_script(BENCHMARK).run(problems=40)
    assert results["problems"]["failed"] >= 10, "hard problems: most groups fail"
    recipe = results["last step + answer (the CPU recipe's)"]
    assert recipe["reaching"] > 0.5, results
    assert results["answer line only"]["reaching"] < 0.2, results
    # What it reaches, it reaches by inventing the earlier steps: few lines hold, and the dataset's own solution
    # is the likelier text after the bare question.
    assert recipe["valid_if_reaching"] < 0.5 and recipe["logprob"] < recipe["solution_logprob"], results
