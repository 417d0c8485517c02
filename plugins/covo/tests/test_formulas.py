"""CoVo's formulas on hand-built distances whose results are known by hand."""

import math

import pytest
import torch

from stackrl_covo.formulas import (
    consistency_volatility,
    curiosity_bonus,
    group_rewards,
    normalise_rows,
    perplexity,
    ril,
    riv,
    step_curiosity,
)

# Own answer in column 0. Ratios to the nearest other answer: 1/2, 2/1, 1/2, 1/1 (a tie).
D = torch.tensor([[1.0, 2.0, 3.0], [2.0, 1.0, 3.0], [1.0, 3.0, 2.0], [1.0, 1.0, 5.0]])


def test_consistency_counts_strictly_nearer_states_and_volatility_the_last_lean_away():
    consistency, volatility = consistency_volatility(D, own=0)
    assert consistency == 2 / 4  # the tie is not "nearer"
    assert volatility == 1 - 2 / 4  # the final run (tie included) is 2 states long; state 1 leaned away


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        (1, (1 / 4, 1 - 1 / 4)),  # nearest only in state 1; state 2 leans away, the final tie is a run of one
        (2, (0 / 4, 1.0)),  # never nearest, the last state leans away
    ],
)
def test_other_columns(own, expected):
    assert consistency_volatility(D, own=own) == pytest.approx(expected)


def test_always_nearest_and_always_tied():
    assert consistency_volatility(torch.tensor([[1.0, 2.0], [1.0, 3.0]]), own=0) == (1.0, 0.0)
    assert consistency_volatility(torch.tensor([[1.0, 1.0], [2.0, 2.0]]), own=1) == (0.0, 0.0)


def test_row_normalisation_sums_to_one_and_keeps_the_ratios():
    normalised = normalise_rows(D)
    assert torch.allclose(normalised.sum(dim=1), torch.ones(4))
    assert torch.allclose(normalised[0], torch.tensor([1 / 6, 2 / 6, 3 / 6]))
    for own in range(3):
        assert consistency_volatility(normalised, own) == consistency_volatility(D, own)


def test_riv_is_the_length_of_the_mean_vector():
    con, vol = torch.tensor([1.0, 0.5]), torch.tensor([0.0, 1.0])
    x = (1.0 + 0.5 * math.cos(1.0)) / 2
    y = (0.0 + 0.5 * math.sin(1.0)) / 2
    assert riv(con, vol) == pytest.approx(math.hypot(x, y))
    assert riv(torch.tensor([0.8]), torch.tensor([0.3])) == pytest.approx(0.8)  # one trajectory: its consistency
    assert riv(torch.tensor([1.0, 1.0]), torch.tensor([0.0, 0.0])) == pytest.approx(1.0)


def test_ril_is_mean_consistency_minus_mean_volatility():
    assert ril(torch.tensor([1.0, 0.5]), torch.tensor([0.0, 1.0])) == pytest.approx(0.75 - 0.5)


# A group of five: answers 0, 0, 1, none, 1. Answer 0's trajectories are consistent; answer 1's lean away.
GROUP_INDEX = [0, 0, 1, None, 1]
GROUP_DISTANCES = [
    torch.tensor([[1.0, 2.0], [1.0, 3.0]]),  # con 1, vol 0
    torch.tensor([[2.0, 1.0], [1.0, 3.0]]),  # con 1/2, vol 1/2
    torch.tensor([[2.0, 1.0], [1.0, 2.0]]),  # own column 1: con 1/2, vol 1
    None,
    torch.tensor([[3.0, 1.0], [2.0, 2.0]]),  # own column 1: con 1/2, vol 0 (the tie ends the run)
]


def test_group_rewards_binary_riv():
    rewards, con, vol = group_rewards(GROUP_INDEX, GROUP_DISTANCES, riv, threshold=0.5)
    assert con.tolist() == [1.0, 0.5, 0.5, 0.0, 0.5]
    assert vol.tolist() == [0.0, 0.5, 1.0, 0.0, 0.0]
    riv_0 = math.hypot((1 + 0.5 * math.cos(0.5)) / 2, (0.5 * math.sin(0.5)) / 2)  # 0.74
    riv_1 = math.hypot((0.5 * math.cos(1.0) + 0.5) / 2, (0.5 * math.sin(1.0)) / 2)  # 0.42
    assert riv_0 >= 0.5 > riv_1
    assert rewards.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]  # no answer: 0


def test_group_rewards_continuous_and_ril():
    rewards, _, _ = group_rewards(GROUP_INDEX, GROUP_DISTANCES, riv, threshold=None)
    riv_0 = math.hypot((1 + 0.5 * math.cos(0.5)) / 2, (0.5 * math.sin(0.5)) / 2)
    riv_1 = math.hypot((0.5 * math.cos(1.0) + 0.5) / 2, (0.5 * math.sin(1.0)) / 2)
    assert rewards.tolist() == pytest.approx([riv_0, riv_0, riv_1, 0.0, riv_1])
    ril_rewards, _, _ = group_rewards(GROUP_INDEX, GROUP_DISTANCES, ril, threshold=None)
    assert ril_rewards.tolist() == pytest.approx([0.75 - 0.25, 0.75 - 0.25, 0.5 - 0.5, 0.0, 0.5 - 0.5])
    binary, _, _ = group_rewards(GROUP_INDEX, GROUP_DISTANCES, ril, threshold=0.05)
    assert binary.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_a_group_with_one_distinct_answer_gets_nothing():
    distances = [torch.tensor([[1.0]]), None, torch.tensor([[1.0]])]
    rewards, con, vol = group_rewards([0, None, 0], distances, riv, threshold=0.0)
    assert rewards.tolist() == con.tolist() == vol.tolist() == [0.0, 0.0, 0.0]
    assert group_rewards([None, None], [None, None], riv, threshold=None)[0].tolist() == [0.0, 0.0]


def test_perplexity_and_step_curiosity():
    assert perplexity(torch.tensor([-1.0, -3.0])).item() == pytest.approx(math.e**2)
    # Surprisal spread evenly: KL to uniform is 0, curiosity is the perplexity.
    assert step_curiosity(torch.tensor([-1.0, -1.0])) == pytest.approx(math.e)
    # Shares 3/4 and 1/4: KL = 3/4 ln(3/2) + 1/4 ln(1/2).
    kl = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    expected = math.e**2 - math.log(kl ** (1 / 3) + 1)
    assert step_curiosity(torch.tensor([-3.0, -1.0])) == pytest.approx(expected, rel=1e-5)
    assert step_curiosity(torch.tensor([0.0, 0.0])) == pytest.approx(1.0)  # every token certain


def test_curiosity_bonus_above_the_threshold_only():
    assert curiosity_bonus(2.5, threshold=2.0, bonus=0.4) == 0.4
    assert curiosity_bonus(2.0, threshold=2.0, bonus=0.4) == 0.0


def _half_consistent(steps: int, final_run: int) -> torch.Tensor:
    """Distances (own answer in column 0) with Con exactly 1/2 and a final run of ``final_run`` states at ratio <= 1."""
    nearer, tie, away = [1.0, 2.0], [1.0, 1.0], [2.0, 1.0]
    half = steps // 2
    if final_run >= half:
        rows = [away] * (steps - final_run) + [tie] * (final_run - half) + [nearer] * half
    else:
        rows = [nearer] * (half - final_run) + [away] * half + [nearer] * final_run
    return torch.tensor(rows)


def test_binary_rewards_at_the_threshold_are_decided_in_float64():
    """An answer with one trajectory of Con 1/2 has RiV exactly 1/2 on paper; float64 arithmetic as in the authors'
    code puts it at or just below 0.5 depending on Vol. Every (T, Vol) decision must be theirs."""
    decisions, expected = [], []
    for steps in range(2, 15, 2):
        for final_run in range(steps + 1):
            distances = [_half_consistent(steps, final_run), torch.tensor([[2.0, 1.0]])]
            rewards, con, vol = group_rewards([0, 1], distances, riv, threshold=0.5)
            assert (con[0].item(), vol[0].item()) == (0.5, 1 - final_run / steps)
            angle = 1 - final_run / steps
            decisions.append(rewards[0].item())
            expected.append(float(math.sqrt((0.5 * math.cos(angle)) ** 2 + (0.5 * math.sin(angle)) ** 2) >= 0.5))
    assert len(decisions) == 63 and 0 < sum(expected) < 63  # ties both ways: a flipped comparison shows
    assert decisions == expected
