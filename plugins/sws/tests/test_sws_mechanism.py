"""SwS's mechanism in a real run of stackrl/arith-skills (the policy writes and answers the new problems): after six
steps of eight groups, the round's weak categories and budgets equal a hand computation from the pass rates the
pool recorded for each drawn problem; each pose request lists failure cases of its category only; and a written
problem joins the pool, labelled with the category it was written for, exactly when enough of its solutions agree,
with their majority answer as its reference. The benchmark (benchmarks/mechanism.py) runs it short."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

SHORT = ["sws.every_steps=6", "data.size=24", "trainer.num_generations=4", "trainer.per_device_train_batch_size=32"]


@pytest.fixture(scope="module")
def measured():
    benchmark = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")
    return benchmark.run("sws", seed=0, steps=6, overrides=SHORT)


def hand_failures(monitor, written):
    """Each recorded problem's pass rates, and the failure cases: no pass rate reaching 0.5 and a least-squares
    slope that is not positive (numpy's fit, apart from the plugin's)."""
    records = {}
    for batch in monitor.batches:
        for row, rate in batch:
            if rate is not None and row not in written:
                records.setdefault(row, []).append(rate)
    failing = {row for row, rates in records.items()
               if max(rates) < 0.5 and (len(rates) < 2 or np.polyfit(range(len(rates)), rates, 1)[0] <= 1e-12)}
    return records, failing


def test_weak_categories_and_budgets_equal_the_hand_computation(measured):
    trainer, monitor = measured["trainer"], measured["monitor"]
    sws = trainer.plugins.plugins["sws"]
    records, failing = hand_failures(monitor, sws.written)
    category = {row: trainer.pool.stats(row).category for row in records}
    recorded, failed = Counter(category.values()), Counter(category[row] for row in failing)
    ratios = {c: failed[c] / recorded[c] for c in failed}
    total = sum(ratios.values())
    budgets = {c: int(16 * r / total) for c, r in ratios.items() if int(16 * r / total) > 0}
    round_ = sws.last_round
    assert round_["step"] == 6 and len(records) == 24  # each of the 24 problems drawn twice: slopes count
    assert round_["ratios"] == pytest.approx(ratios)
    assert round_["budgets"] == budgets
    # This seed tells weakest from strongest: some categories are not weak at all, and the budgets differ.
    assert 0 < len(budgets) < 6 and len(set(budgets.values())) > 1, budgets
    # Each request lists failure cases of its own category, as many as there are (up to 4).
    assert Counter(c for c, _ in round_["requests"]) == Counter(budgets)
    for asked, shown in round_["requests"]:
        assert shown and set(shown) <= {row for row in failing if category[row] == asked}
        assert len(shown) == min(4, sum(category[row] == asked for row in failing))


def test_written_problems_join_with_their_category_exactly_when_their_answers_agree(measured):
    trainer = measured["trainer"]
    sws = trainer.plugins.plugins["sws"]
    round_ = sws.last_round
    kept = []
    for (problem, asked), answers in zip(round_["candidates"], round_["answers"]):
        assert len(answers) == 4
        counts = Counter(a for a in answers if a is not None)
        top = max(counts.values(), default=0)
        kept.append((problem + "\n", asked, next(a for a in answers if counts.get(a) == top)) if top >= 3 else None)
    assert any(kept) and not all(kept), "this seed has written problems both kept and dropped by the answer check"
    rows = [trainer.pool.row(i) for i in round_["added"]]
    assert [(row["question"], row["category"], row["answer"]) for row in rows] == [k for k in kept if k]
    assert all(row["category"] in round_["budgets"] for row in rows)
    assert all(not trainer.pool.stats(i).label_free for i in round_["added"])
