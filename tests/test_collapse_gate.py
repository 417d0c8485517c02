"""The collapse gate of stackrl.blocks.tokensignals: closes below its threshold at the step it happens, relative to the
first value when asked, stays closed when latched, and its state round-trips."""

import pytest

from stackrl.blocks.tokensignals import CollapseGate
from stackrl.errors import StackrlError


def test_an_absolute_gate_closes_at_the_first_value_below_its_threshold_and_stays_closed():
    gate = CollapseGate(1.0)
    assert [gate.update(v, step) for step, v in enumerate([2.0, 1.0, 0.9, 3.0])] == [True, True, False, False]
    assert gate.closed_at == 2 and gate.settled


def test_a_relative_gate_compares_with_the_first_value():
    gate = CollapseGate(0.5, relative=True)
    assert gate.limit is None
    assert [gate.update(v, step) for step, v in enumerate([4.0, 2.5, 2.0, 1.9])] == [True, True, True, False]
    assert gate.baseline == 4.0 and gate.limit == 2.0 and gate.closed_at == 3


def test_an_unlatched_gate_reopens_when_the_value_recovers():
    gate = CollapseGate(1.0, latch=False)
    assert [gate.update(v, step) for step, v in enumerate([0.5, 1.5, 0.2])] == [False, True, False]
    assert gate.closed_at == 2 and not gate.settled


def test_a_smoothed_gate_compares_the_moving_average():
    """One low batch (0.4) closes a plain gate; the average 0.5 * 2.0 + 0.5 * 0.4 = 1.2 stays above 1.0 until the
    next low one: 0.5 * 1.2 + 0.5 * 0.4 = 0.8."""
    gate = CollapseGate(1.0, smoothing=0.5)
    assert [gate.update(v, step) for step, v in enumerate([2.0, 0.4, 0.4])] == [True, True, False]
    assert gate.value == pytest.approx(0.8) and gate.closed_at == 2


def test_the_state_round_trips():
    gate = CollapseGate(0.5, relative=True, latch=False, smoothing=0.5)
    for step, value in enumerate([4.0, 0.0]):
        gate.update(value, step)
    fresh = CollapseGate(0.5, relative=True, latch=False, smoothing=0.5)
    fresh.load_state_dict(gate.state_dict())
    assert (fresh.baseline, fresh.value, fresh.is_open, fresh.closed_at) == (4.0, 2.0, True, None)
    assert not fresh.update(0.0, 2)  # 0.5 * 2.0: below half of 4.0


@pytest.mark.parametrize("threshold, relative", [(-0.1, False), (1.5, True)])
def test_a_threshold_out_of_range_is_refused(threshold, relative):
    with pytest.raises(StackrlError, match="CollapseGate: threshold must lie in"):
        CollapseGate(threshold, relative=relative)
    with pytest.raises(StackrlError, match=r"CollapseGate: smoothing must lie in \[0, 1\), not 1.0"):
        CollapseGate(1.0, smoothing=1.0)
