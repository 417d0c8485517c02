"""The process tasks MR-RLVR builds from a worked solution, and the agreement that rewards them."""

import random

import pytest

from stackrl_mrrlvr.tasks import (
    fill_agreement,
    maskable_steps,
    masked_solution,
    order_agreement,
    shuffled_solution,
)

SOLUTION = "3 + 4 = 7\n7 * 2 = 14\n14 - 9 = 5\nThe answer is 5."


def test_only_steps_with_a_result_before_the_last_line_are_maskable():
    assert maskable_steps(SOLUTION) == [0, 1, 2]
    assert maskable_steps("Let x be 2.\nx + 1 = 3\nSo the answer is 3.") == [1]


def test_a_fill_masks_the_result_where_it_stands_and_wherever_it_is_used_later():
    assert masked_solution(SOLUTION, 0, "[MASK]") == "3 + 4 = [MASK]\n[MASK] * 2 = 14\n14 - 9 = 5\nThe answer is 5."
    assert masked_solution(SOLUTION, 2, "?") == "3 + 4 = 7\n7 * 2 = 14\n14 - 9 = ?\nThe answer is ?."


def test_a_masked_number_is_masked_whole_not_inside_other_numbers():
    solution = "3 + 4 = 7\n7 + 17 = 24\n24 * 7 = 168\nThe answer is 168."
    assert masked_solution(solution, 0, "_").split("\n")[1:3] == ["_ + 17 = 24", "24 * _ = 168"]
    with pytest.raises(ValueError, match="no result to mask"):
        masked_solution(solution, 3, "_")


@pytest.mark.parametrize("seed", range(20))
def test_a_reorder_shuffles_the_steps_never_into_their_own_order_and_keeps_the_last_line(seed):
    shuffled = shuffled_solution(SOLUTION, random.Random(seed)).split("\n")
    original = SOLUTION.split("\n")
    assert shuffled[-1] == original[-1]
    assert sorted(shuffled[:-1]) == sorted(original[:-1]) and shuffled[:-1] != original[:-1]


def test_a_two_step_reorder_swaps_them_and_one_step_cannot_be_reordered():
    assert shuffled_solution("1 + 1 = 2\n2 * 3 = 6\nThe answer is 6.", random.Random(0)) == (
        "2 * 3 = 6\n1 + 1 = 2\nThe answer is 6."
    )
    with pytest.raises(ValueError, match="two different steps"):
        shuffled_solution("1 + 1 = 2\nThe answer is 2.", random.Random(0))


def test_a_fill_agrees_only_when_the_masked_step_comes_back_whole():
    right = "3 + 4 = 7\n7 * 2 = 14\n14 - 9 = 5\nThe answer is 5."
    assert fill_agreement(right, SOLUTION, 1) == 1.0
    assert fill_agreement("  7 * 2 = 14  \nThe answer is 5.", SOLUTION, 1) == 1.0
    assert fill_agreement("3 + 4 = 7\n7 * 2 = 15\n15 - 9 = 6\nThe answer is 6.", SOLUTION, 1) == 0.0
    # Right elsewhere, wrong at the masked step: the reward is the masked step's alone.
    assert fill_agreement("3 + 4 = 8\n7 * 2 = 14\n14 - 9 = 5", SOLUTION, 0) == 0.0
    assert fill_agreement("The answer is 5.", SOLUTION, 2) == 0.0


def test_order_agreement_is_the_share_of_steps_written_in_their_original_order():
    s1, s2, s3, last = SOLUTION.split("\n")
    assert order_agreement(SOLUTION, SOLUTION) == 1.0
    assert order_agreement(f"{s1}\n{s3}\n{s2}\n{last}", SOLUTION) == pytest.approx(2 / 3)
    assert order_agreement(f"{s3}\n{s2}\n{s1}", SOLUTION) == pytest.approx(1 / 3)
    assert order_agreement(f"{s2}\n{s3}", SOLUTION) == pytest.approx(2 / 3)
    # Lines in between do not break the order; a step with another result is not that step.
    assert order_agreement(f"{s1}\nso\n{s2}\n{s3}", SOLUTION) == 1.0
    assert order_agreement(f"{s1}\n7 * 2 = 15\n{s3}", SOLUTION) == pytest.approx(2 / 3)
    assert order_agreement("", SOLUTION) == 0.0
