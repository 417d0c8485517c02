"""CSC-SQL's consistency step on stackrl/arith-code's own sampled queries: the plugin's reward stage groups them by
execution result exactly as ``same_rows`` does by hand, and its vote beats a single sample."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism


def test_execution_grouped_vote_beats_one_sample_on_real_queries():
    figures = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py").run(problems=28, group=8, seed=0)
    # The samples can tell the rule from its wrong versions: some problems' queries return the same rows written
    # otherwise (grouping by text would split them), and some queries fail.
    assert figures["same_rows_other_text"] > 0 and figures["ran"] < 1.0
    # The plugin's rewards and groups are the hand-run execution match and same_rows classes (failed in none).
    assert figures["reward_errors"] == 0 and figures["grouping_errors"] == 0
    assert figures["vote_accuracy"] == pytest.approx(figures["hand_vote_accuracy"])
    assert figures["plugin_top2_accuracy"] == pytest.approx(figures["top2_accuracy"])
    # Voting raises accuracy over a single sample (0.56 -> 0.71 at seed 0); the top two groups hold more still.
    assert figures["vote_accuracy"] >= figures["sample_accuracy"] + 0.1
    assert figures["plugin_top2_accuracy"] >= figures["vote_accuracy"]
