"""RLER on the built-in models, short (the full figures come from benchmarks/mechanism.py): the reward each group
got is the ensemble rule on the votes the estimators really cast, an estimator that disagrees moves it as the rule
says, and the self-vote's error on the same rows leans to over-reward."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def by_hand(rows: list, votes: dict) -> list[float]:
    """The rule written out again: each estimator's answer shares averaged, the label's share c, and each row
    c * [its answer is the label] + (1 - c) * its answer's share (answers compared as written: integers)."""
    answers = list(dict.fromkeys(a for name in votes for a in votes[name] if a is not None))
    share = {a: sum(votes[name].count(a) / len(votes[name]) for name in votes) / len(votes) for a in answers}
    label = max(answers, key=lambda a: (share[a], -answers.index(a)))
    c = share[label]
    return [0.0 if a is None else c * (a == label) + (1 - c) * share[a] for a in rows]


@pytest.fixture(scope="module")
def groups():
    figures, votes = load_script(BENCHMARK).run(seed=0, steps=4)
    return figures, votes.groups


def test_every_group_gets_the_ensemble_rule_on_every_estimators_votes(groups):
    _, scored = groups
    assert len(scored) == 8
    for group in scored:
        assert set(group["votes"]) == {"policy", "snapshot", "tiny", "skills"}
        assert group["rewards"] == pytest.approx(by_hand(group["rows"], group["votes"]), abs=1e-6), group


def test_an_estimator_that_disagrees_with_the_policy_moves_the_reward_as_the_rule_says(groups):
    _, scored = groups
    moved = 0
    for group in scored:
        rows, votes = group["rows"], group["votes"]
        majority = max((a for a in rows if a is not None), key=rows.count, default=None)
        for name in ("snapshot", "tiny", "skills"):
            if majority is None or votes[name] == [majority]:
                continue
            # The same votes but this estimator's answer the policy's majority: the majority rows earn more with it.
            agreeing = {**votes, name: [majority]}
            i = rows.index(majority)
            assert by_hand(rows, agreeing)[i] > group["rewards"][i], (name, group)
            moved += 1
        # Another model's vote is in every reward: the policy's own vote alone gives other rewards where one
        # disagrees.
        if any(votes[name] != [majority] for name in ("snapshot", "tiny", "skills")):
            assert group["rewards"] != pytest.approx(by_hand(rows, {"policy": rows}), abs=1e-6), group
    assert moved, "some estimator disagreed with the policy's majority"


def test_the_self_vote_over_rewards_on_the_same_rows(groups):
    figures, _ = groups
    # The paper's diagnosis: a self-reward errs toward rewarding its own wrong answers (rho_symbias > 0).
    assert figures["self_rho_symbias"] > 0, figures
    assert 0 < figures["self_rho_noise"] < 1 and 0 < figures["rho_noise"] < 1, figures
