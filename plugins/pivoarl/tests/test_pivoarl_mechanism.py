"""PivoARL's mechanism on the built-in model, one step of the CPU recipe (benchmarks/mechanism.py's ``measure``):
retries from the pivot succeed more often than fresh attempts at the same failed questions, and the credit split
lifts the retried failures' kept prefixes above what whole-trajectory credit gives them, on the same rollout."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
SETTINGS = ["trainer.disable_tqdm=true", "trainer.learning_rate=1e-4"]


def test_retries_from_the_pivot_find_the_answer_and_the_split_spares_the_prefix(tmp_path):
    mechanism = load_script(BENCHMARK)
    split = mechanism.measure(0, tmp_path, SETTINGS)
    whole = mechanism.measure(0, tmp_path, [*SETTINGS, "pivoarl.prefix_credit=outcome"])
    assert split["retried"] >= 16 and split["with_prefix"] >= 8, split
    # the same first step: the same rollout, only the credit differs
    assert (split["retry"], split["fresh"]) == (whole["retry"], whole["fresh"]), (split, whole)
    # every retry continues its failure's own lines before the first wrong one, as they were written
    assert split["verbatim"] == 1.0, split
    # a retry keeps the correct prefix and writes the pivot again: it reaches the answer more often than a fresh
    # attempt (seed 0: 0.219 against 0.135)
    assert split["retry"] > split["fresh"] + 0.05, split
    # the failure's negative advantage falls on its wrong line and after: lowered under both credits
    assert split["suffix"] < 0 and whole["suffix"] < 0, (split, whole)
    # its kept prefix is credited by its retries (never blamed) rather than by its own failure: raised more than under
    # whole-trajectory credit (seed 0: 0.0028 against 0.0009)
    assert split["prefix"] > whole["prefix"] + 0.001, (split, whole)
