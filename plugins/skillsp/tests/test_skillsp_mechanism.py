"""Skill-SP's controller on the built-in model: from the solver's real outcomes over three steps (each row's answer
line read by hand), each skill's utility and the weights its problems are drawn with equal the hand computation of
the rule, every category of the task is in the skill library, and a skill whose problems were all solved or all
failed is drawn less than one the solver split on. Ignoring the feedback, flipping the informativeness (rewarding
all-or-nothing skills) or never adding a skill fails it (plugins/skillsp/README.md)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")
ALPHA, FLOOR = 0.5, 0.05  # the CPU recipe's


def by_hand(utilities: dict) -> dict:
    total = sum(u + FLOOR for u in utilities.values())
    return {skill: (u + FLOOR) / total for skill, u in utilities.items()}


def test_the_controller_follows_the_solver_and_draws_less_of_all_or_nothing_skills():
    figures, feedback, skillsp = BENCHMARK.run("skillsp", seed=0, steps=3,
                                               overrides=["trainer.per_device_train_batch_size=48"])
    assert len(feedback.steps) == 3
    utilities = {skill: 1.0 for skill in feedback.steps[0]["drawn_with"]}
    assert len(utilities) == 6 and set(skillsp.utilities) == set(utilities)  # every category became a skill
    lowered = split = 0
    for step in feedback.steps:
        assert step["drawn_with"] == pytest.approx(by_hand(utilities))
        attempts, wins = {}, {}
        for skill, ok in zip(step["skills"], step["solved"], strict=True):
            attempts[skill] = attempts.get(skill, 0) + 1
            wins[skill] = wins.get(skill, 0) + ok
        before = dict(utilities)
        for skill in attempts:
            rate = wins[skill] / attempts[skill]
            utilities[skill] = (1 - ALPHA) * utilities[skill] + ALPHA * (1 - abs(2 * rate - 1))
        # All solved or all failed: the skill's utility halves; split evenly: it rises toward 1.
        for skill in attempts:
            if wins[skill] in (0, attempts[skill]):
                assert utilities[skill] == pytest.approx(before[skill] / 2)
                lowered += 1
            elif wins[skill] * 2 == attempts[skill]:
                assert utilities[skill] >= before[skill]
        # After the first step (every skill at 1 before it), an all-or-nothing skill is drawn less than a split one.
        if step is feedback.steps[0]:
            after = by_hand(utilities)
            none_or_all = [s for s in attempts if wins[s] in (0, attempts[s])]
            mixed = [s for s in attempts if 0 < wins[s] < attempts[s]]
            split = len(mixed)
            assert all(after[a] < after[m] for a in none_or_all for m in mixed), (after, attempts, wins)
    assert lowered and split, "no all-or-nothing or no split skill was seen: the test is void"
    assert skillsp.utilities == pytest.approx(utilities)
    assert feedback.final == pytest.approx(by_hand(utilities))
    assert figures["weight_spread"] > 1.2, figures
