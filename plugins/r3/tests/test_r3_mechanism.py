"""R^3's replay on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_replayed_successes_give_all_fail_groups_a_reward_spread():
    figures, replays = load_script(BENCHMARK).run(seed=0, steps=12)
    assert replays.replayed, "some problem failed a whole group after an earlier success"
    for row in replays.replayed:
        assert row == {"success": True, "earlier_same_prompt": True, "group_failed": True}, row
    assert figures["spread"] > figures["spread_sampled"], figures


REFLECTION = Path(__file__).resolve().parents[1] / "benchmarks" / "reflection.py"


def test_a_persistent_failure_is_shown_its_own_earlier_failure_in_a_group_that_failed():
    figures, reflections = load_script(REFLECTION).run(seed=0, steps=8, resamples=1)
    assert reflections.reflected, "some problem failed a whole group again after an earlier failure"
    for row in reflections.reflected:
        assert {key: row[key] for key in ("earlier_same_prompt_failure", "group_failed")} == {
            "earlier_same_prompt_failure": True, "group_failed": True}, row
