"""B-STaR's choices on the built-in model, short (the full figures come from benchmarks/mechanism.py): every probe's
temperature and every batch's kept rows are the ones the balance score, recomputed here by hand, picks."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
N_STAR = 4  # the CPU recipe's bstar.n_star
GRID = [round(-1.0 + 0.01 * i, 2) for i in range(301)]  # the authors' sweep of the threshold, from below


def by_hand(queries, threshold):
    """The balance score written out: per query, the distinct texts scoring above the threshold (right: 1)."""
    total = 0.0
    for query in queries:
        kept = {text: right for text, right in query if float(right) > threshold}
        if kept:
            good = sum(kept.values())
            total += min(good / N_STAR, 1.0) * good / len(kept)
    return total / len(queries)


def best(queries):
    """The highest balance over the grid and the lowest threshold that reaches it."""
    scores = [by_hand(queries, t) for t in GRID]
    top = max(scores)
    return top, GRID[scores.index(top)]


@pytest.fixture(scope="module")
def choices():
    return load_script(BENCHMARK).run(seed=0, steps=6)[1]


def test_each_probe_chooses_the_temperature_with_the_highest_balance_score(choices):
    assert len(choices.probes) == 6
    contested = 0
    for probe in choices.probes:
        balances = {t: best(queries)[0] for t, queries in probe["samples"].items()}
        top = max(balances.values())
        want = next(t for t, b in balances.items() if b == top)  # the first of equals, as the authors'
        assert probe["chosen"] == want, (probe["step"], balances, probe["chosen"])
        contested += len(set(balances.values())) > 1
    assert contested >= 3, "most probes' temperatures differ in balance"


def test_each_batch_keeps_the_rows_above_its_best_threshold(choices):
    dropped_some = 0
    for batch in choices.batches:
        _, threshold = best(batch["groups"])
        rows = [right for group in batch["groups"] for _, right in group]
        assert batch["excluded"] == {i for i, right in enumerate(rows) if not float(right) > threshold}, batch["step"]
        dropped_some += bool(batch["excluded"])
    assert dropped_some, "some batch had wrong answers to leave out"
