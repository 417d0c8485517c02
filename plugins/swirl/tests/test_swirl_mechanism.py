"""SWIRL's mechanism on the built-in role model, short: three real steps of configs/recipes/swirl-cpu.yaml (two
forward, one inverse), every reward worked out again by hand from the right frozen model."""

import re
from pathlib import Path

import pytest
import torch

from stackrl.tasks.transitions import next_state
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
TOLERANCE = 1e-5  # float32 scoring against float64 by hand: 2e-7 measured


def by_hand(mechanism, trainer, model, record) -> torch.Tensor:
    """The hand-computed rewards of a step's rows under ``model``, each distinct row worked out once."""
    rows = list(zip(record["roles"], record["states"], record["completions"], record["targets"]))
    distinct = sorted(set(rows))
    values = dict(zip(distinct, mechanism.by_hand(trainer, model, *zip(*distinct)).tolist()))
    return torch.tensor([values[row] for row in rows], dtype=torch.float64)


def test_each_phase_is_rewarded_by_the_other_direction_frozen_at_its_start():
    mechanism = load_script(BENCHMARK)
    # At 1e-4 (the recipe: 1e-5) one step moves the live policy well clear of the tolerance.
    _, _, monitor, trainer = mechanism.run(seed=0, steps=3, measure=False, overrides=["trainer.learning_rate=1e-4"])
    steps = monitor.steps
    # Phases alternate every two steps (the recipe's phase_steps), from the forward model.
    assert [(s["step"], set(s["roles"])) for s in steps] == [(0, {"forward"}), (1, {"forward"}), (2, {"inverse"})]
    start, later, second_phase = (by_hand(mechanism, trainer, s["policy"], r) for s, r in
                                  ((steps[0], steps[1]), (steps[1], steps[1]), (steps[2], steps[2])))
    rewards = [torch.tensor(s["rewards"], dtype=torch.float64) for s in steps]
    # The forward phase's second step is rewarded by the policy as the phase began (the frozen inverse model),
    # not by the live policy, which its first step has moved.
    assert torch.allclose(rewards[0], by_hand(mechanism, trainer, steps[0]["policy"], steps[0]), atol=TOLERANCE)
    assert torch.allclose(rewards[1], start, atol=TOLERANCE)
    assert (rewards[1] - later).abs().max() > 10 * TOLERANCE
    # The inverse phase is rewarded by the policy frozen anew at its start (the live one there: its first step).
    assert torch.allclose(rewards[2], second_phase, atol=TOLERANCE)
    assert (rewards[2] - by_hand(mechanism, trainer, steps[0]["policy"], steps[2])).abs().max() > 5 * TOLERANCE
    # The forward reward ranks a next state that is the world's (next_state) above one whose worked-out result is
    # slipped by one (wrong per next_state), for every transition the run drew. (The reward scores whether the
    # action can be read back: a generated next state that keeps the action's result but garbles the rest of the
    # expression is rewarded as highly as the right one; the README says so.)
    drawn = sorted({(s, a) for record in steps[:2] for s, a in zip(record["states"], record["targets"])})
    right = [next_state(s, a) for s, a in drawn]
    slipped = [slip(y) for y in right]
    assert all(next_state(s, a) != y for (s, a), y in zip(drawn, slipped))
    record = {"roles": ["forward"] * 2 * len(drawn), "states": [s for s, _ in drawn] * 2,
              "completions": right + slipped, "targets": [a for _, a in drawn] * 2}
    scored = by_hand(mechanism, trainer, steps[0]["policy"], record).view(2, -1)
    assert (scored[0] > scored[1]).all() and (scored[0] - scored[1]).mean() > 0.1, scored  # 0.37 measured


def slip(state: str) -> str:
    """The state with its first number (the result the action worked out) moved by one."""
    number = re.match(r"\(*(\d+)", state)
    return state[: number.start(1)] + str(int(number[1]) + 1) + state[number.end(1):]
