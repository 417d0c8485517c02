"""Venus on the built-in code role, on the real sandbox: among passing programs of known cost the faster gets the
higher reward, by the authors' formula on the median of the recorded run times; failing programs get the
degradation penalty whatever their speed; one real step of stackrl/arith-code's programs is rewarded the same way.
The full figures come from benchmarks/mechanism.py."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def by_hand(times: list[float], reference: list[float]) -> float:
    """0.5 (kept passing) + 0.5 * tanh(clip((t_ref - t) / t_ref, -1, 1)), both times medians of their runs."""
    t, t_ref = statistics.median(times), statistics.median(reference)
    return 0.5 + 0.5 * math.tanh(max(-1.0, min(1.0, (t_ref - t) / (t_ref + 1e-9))))


def test_faster_correct_programs_score_higher_and_wrong_ones_are_penalised_whatever_their_speed():
    script = load_script(BENCHMARK)
    group = script.constructed(repeats=5)
    reward = dict(zip(group["names"], group["rewards"]))
    times = dict(zip(group["names"], group["times"]))
    assert group["reference_passed"] and group["passed"] == [True, True, True, False, False]
    # the programs' costs are known: no loop < a short loop < a long one (about 7, 11 and 25 ms of CPU)
    assert statistics.median(times["plain"]) < statistics.median(times["short_loop"]) < statistics.median(
        times["long_loop"]), times
    assert reward["plain"] > reward["short_loop"] > reward["long_loop"], reward
    for name in ("plain", "short_loop", "long_loop"):
        assert len(times[name]) == 5
        assert reward[name] == pytest.approx(by_hand(times[name], group["reference_times"]), abs=1e-12), name
    # failing: the degradation penalty, the fast one as the slow one, and neither run again to be timed
    assert reward["wrong_fast"] == reward["wrong_slow"] == -1.0
    assert len(times["wrong_fast"]) == len(times["wrong_slow"]) == 1


def test_one_real_step_rewards_the_models_programs_by_pass_then_median_time():
    figures, steps = load_script(BENCHMARK).run(seed=0, steps=1)
    (call,) = steps.calls
    assert 0 < sum(call["passed"]) < len(call["passed"]), call["passed"]  # the model writes passing programs, and not only
    references = list(call["baselines"].values())
    assert all(passed for passed, _ in references)  # the task's own programs pass
    size = len(call["rewards"]) // len(references)
    for i, (reward, passed, times) in enumerate(zip(call["rewards"], call["passed"], call["times"])):
        if passed:
            reference = call["baselines"][sorted(call["baselines"])[i // size]]
            t_ref = reference[1]
            expected = 0.5 + 0.5 * math.tanh(max(-1.0, min(1.0, (t_ref - statistics.median(times)) / (t_ref + 1e-9))))
            assert reward == pytest.approx(expected, abs=1e-12) and len(times) == 5
        else:
            assert reward == -1.0 and len(times) == 1
    assert 0 < figures["sandbox_share"] < 1
