"""CoCoS on the built-in code role, on the real sandbox: hand-built trajectories (a program kept right, one fixed at
turn 2, one broken at turn 2, a partial program finished, one wrong twice) get, turn by turn, the share of the
problem's tests their programs pass, and the accumulated reward gamma * r1 + (r2 - r1) computed here by hand; one
real step of stackrl/arith-code's two-turn rows is rewarded by the same formula, each group continuing one shared
first program. The full figures come from benchmarks/mechanism.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
GAMMA = 0.5  # the authors'


def by_hand(r1: float, r2: float, gamma: float = GAMMA) -> float:
    """gamma ** 1 * (r1 - 0) + gamma ** 0 * (r2 - r1)."""
    return gamma * r1 + (r2 - r1)


def test_turn_scores_and_accumulated_rewards_equal_the_hand_computation_on_real_runs():
    group = load_script(BENCHMARK).constructed()
    scores = dict(zip(group["names"], group["scores"]))
    reward = dict(zip(group["names"], group["rewards"]))
    lines = len(group["tests"]) - 1  # one assertion a line of the program, then the printed answer
    assert lines >= 2, group["tests"]
    # the fine-grained score: a slip in the last line passes the assertions of the lines before it
    partial = (lines - 1) / (lines + 1)
    assert scores == {"kept_right": [1.0, 1.0], "fixed": [0.0, 1.0], "broken": [1.0, 0.0],
                      "partial_finished": [pytest.approx(partial), 1.0], "wrong_twice": [0.0, pytest.approx(partial)]}
    for name, (r1, r2) in scores.items():
        assert reward[name] == pytest.approx(by_hand(r1, r2), abs=1e-12), name
    # what the rule means: a fix earns more than keeping a right program, breaking one is paid below staying wrong
    assert reward["fixed"] == 1.0 > reward["kept_right"] == GAMMA > 0 > reward["broken"] == GAMMA - 1
    assert reward["wrong_twice"] == pytest.approx(partial) and partial > 0  # credit for the better second program
    assert reward["partial_finished"] == pytest.approx(1 - (1 - GAMMA) * partial)  # less than a fix from nothing
    assert group["acted"] == (5, 5)
    assert group["logged"]["fix_rate"] == pytest.approx(2 / 3)  # of the three wrong first programs, two fixed


def test_one_real_step_rewards_the_models_turns_by_the_accumulated_formula():
    figures, steps = load_script(BENCHMARK).run(seed=0, steps=1)
    (call,) = steps.calls
    assert len(call["scores"]) == 16 and all(len(s) == 2 for s in call["scores"])
    assert any(s[0] == 1.0 for s in call["scores"])  # the model's first programs pass, run in the sandbox
    for group in range(0, 16, 4):  # each group of 4 continues one first program: one first-turn score
        assert len({s[0] for s in call["scores"][group:group + 4]}) == 1
    for (r1, r2), reward in zip(call["scores"], call["rewards"]):
        assert reward == pytest.approx(by_hand(r1, r2), abs=1e-12)
    assert 0.0 <= figures["turn2_last"] <= 1.0
