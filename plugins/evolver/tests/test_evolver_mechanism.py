"""EvolveR's lifecycle on the built-in model, short (the full figures come from benchmarks/mechanism.py).

One run of configs/recipes/evolver-cpu.yaml with the authors' retrieval (the closest principle, however far:
min_similarity 0), where a question whose own principle is missing is shown another question's, which arith-tiny
copies and fails: those principles' scores fall and the prune removes them, while a question shown its own earlier
success solves it."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
THRESHOLD = 0.3  # the recipe's prune_threshold (prune_every: 2) and merge_threshold below
MERGE = 0.85


@pytest.fixture(scope="module")
def lifecycle():
    script = load_script(BENCHMARK)
    figures, monitor = script.run(seed=0, steps=8, overrides=["evolver.min_similarity=0.0"])
    return script, figures, monitor


def test_a_question_shown_its_own_earlier_success_solves_it_more_often_than_one_shown_nothing(lifecycle):
    _, figures, monitor = lifecycle
    for step in monitor.steps:
        for keys, prompt in zip(step["shown"], step["trained"]):
            assert all(prompt.startswith(step["texts"][k]) for k in keys), "a row was not shown its principle"
    assert figures["own_success"] >= figures["bare_success"] + 0.3, figures
    assert figures["other_success"] < figures["own_success"], figures


def test_each_principle_shown_gains_a_use_per_row_and_a_success_per_solved_row(lifecycle):
    _, _, monitor = lifecycle
    credited = merged = 0
    for step in monitor.steps:
        for key, (uses, successes) in step["before"].items():
            if key not in step["after"]:
                continue  # pruned this step
            rows = [ok for keys, ok in zip(step["shown"], step["ok"]) if key in keys]
            du, ds = step["after"][key][0] - uses, step["after"][key][1] - successes
            assert du - ds == rows.count(False), (step["step"], key, rows, du, ds)  # a merge adds one of each
            assert ds >= rows.count(True), (step["step"], key, rows, du, ds)
            credited += len(rows)
            merged += ds - rows.count(True)
    assert credited and merged, "no principle was shown, or none merged: the test is void"


def test_principles_that_misled_are_pruned_and_no_kept_one_scores_below_the_threshold(lifecycle):
    _, figures, monitor = lifecycle
    assert figures["pruned"] > 0, figures
    for step in monitor.steps:
        if step["step"] % 2 == 0:
            assert all(score >= THRESHOLD for score in step["scores"].values()), (step["step"], step["scores"])
        for key in set(step["before"]) - set(step["after"]):
            rows = [ok for keys, ok in zip(step["shown"], step["ok"]) if key in keys]
            assert rows.count(False) > rows.count(True), (step["step"], key, rows)


def test_no_two_kept_principles_repeat_each_other(lifecycle):
    script, _, monitor = lifecycle
    for step in monitor.steps:
        assert script.duplicates(step["kept"], MERGE) == [], step["step"]
