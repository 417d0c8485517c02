"""UCOB on the built-in model, three steps with a planted library (the full figures: benchmarks/mechanism.py).

An easy problem's most similar record is misleading (another problem's solution): its skill view fails where the
plain view solves, so the plain view teaches, the record's utility falls and retrieval turns to the less similar
helpful record. A hard problem's record is its own solution: the skill view solves where the plain view fails, and
the skill view teaches.
"""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_better_view_teaches_and_retrieval_leaves_a_misleading_skill():
    figures, _ = load_script(BENCHMARK).run(seed=0, steps=3, planted=True)
    # The views differ as planted: a misleading skill hurts, a problem's own solution helps.
    assert figures["skill_reward_misleading"] < figures["plain_reward_misleading"] - 0.5, figures
    assert figures["skill_reward_own"] > figures["plain_reward_own"] + 0.2, figures
    # Every group that distilled did so from its better view, and both directions happened.
    assert figures["teacher_higher"] == 1.0, figures
    assert figures["plain_taught_misleading"] >= 0.75, figures
    assert figures["skill_taught_own"] >= 0.5, figures
    # Similarity first chose the misleading records; the utility update moved retrieval to the helpful ones.
    assert figures["helpful_first"] == 0.0, figures
    assert figures["helpful_last"] >= 0.75, figures
