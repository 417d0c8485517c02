"""SPIRAL's mechanism on stackrl/arith-games at self-play tic-tac-toe, short (benchmarks/mechanism.py has the figures):
what TRL's loss receives for each row is its seat's return less that seat's moving baseline, recomputed here by hand
from the returns of every step, and it is not GRPO's group advantage."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
DECAY = 0.95  # the recipe's, the authors' role_baseline_ema_gamma


def test_the_loss_gets_each_seats_return_less_its_own_moving_baseline():
    mechanism = load_script(BENCHMARK)
    steps, plugin = mechanism.run(seed=0, steps=3)
    assert len(steps) == 3
    baselines = {}  # (game, seat) -> b, from 0, read before the row's return goes in
    for step in steps:
        assert sorted(step.loss) == list(range(len(step.returns)))  # every row reached the loss
        expected = []
        for seat, game, value in zip(step.seats, step.games, step.returns):
            before = baselines.get((game, seat), 0.0)
            expected.append(value - before)
            baselines[(game, seat)] = DECAY * before + (1 - DECAY) * value
        got = [step.loss[row] for row in range(len(step.returns))]
        assert got == pytest.approx(expected, abs=1e-6), step.returns
        # ...and not GRPO's group-relative, std-scaled advantage of the same rows
        assert max(abs(g - a) for g, a in zip(got, step.grpo.tolist())) > 0.05
    assert plugin.baselines.values == pytest.approx(baselines)
    # The episodes give the seats different histories, so a shared baseline, a frozen one or the other seat's would
    # each have given other advantages: both seats won and lost, and their baselines parted.
    for seat in (0, 1):
        values = {v for step in steps for s, v in zip(step.seats, step.returns) if s == seat}
        assert {1.0, -1.0} <= values
    assert abs(baselines[("tictactoe", 0)] - baselines[("tictactoe", 1)]) > 0.05
