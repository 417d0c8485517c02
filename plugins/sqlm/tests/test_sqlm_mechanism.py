"""SQLM's mechanism on the built-in posing model (stackrl/arith-skills): the questions the proposer is rewarded for
are those the solver splits on. Each posed question is solved 8 times afresh, answers the plugin never saw: of the
rewarded questions, nearly all split the fresh answers again (more than one and fewer than all agree with their
majority); of the others, far fewer (they are unanimous, too easy, or share no answer, too hard). A flipped band,
or one without its upper or lower bound, fails it (plugins/sqlm/README.md)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")


def test_rewarded_questions_split_the_solver_and_the_others_do_not():
    figures, proposals = BENCHMARK.run(seed=0, steps=12, resolve=8,
                                       overrides=["trainer.per_device_train_batch_size=8", "sqlm.proposer_share=0.5"])
    rewarded = [p for p in proposals.posed if p["rewarded"]]
    others = [p for p in proposals.posed if not p["rewarded"]]
    assert len(rewarded) >= 5 and len(others) >= 5, (len(rewarded), len(others))
    assert figures["rewarded_band"] >= 0.75, figures
    assert figures["rewarded_band"] > figures["other_band"] + 0.15, figures
    # The lower bound: a rewarded question seldom scatters the fresh answers; the others often do (too hard).
    assert figures["rewarded_scattered"] <= 0.1 < figures["other_scattered"] - 0.1, figures
    # The upper bound: the questions the solver answered alike (too easy) go unrewarded. This model seldom poses
    # one, so the margin is small: rewarded questions are no more often unanimous afresh than the others.
    assert figures["rewarded_unanimous"] <= figures["other_unanimous"] + 0.05, figures
