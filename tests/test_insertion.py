"""The insertion block: which samples reach their answer, the failed groups, and the last rows replaced."""

from types import SimpleNamespace

from stackrl.blocks.insertion import failed_groups, into_last_rows, reaches


def test_reaches_reads_the_final_answer_up_to_equivalence():
    assert reaches("2 + 3 = 5\nThe answer is 5.", "5")
    assert reaches("The answer is 0.5.", "1/2")
    assert not reaches("2 + 3 = 5\nThe answer is 6.", "5")
    assert not reaches("2 + 3 = 5", "5")  # no final answer stated


def test_failed_groups_are_those_without_a_correct_row():
    assert failed_groups([False, False, True, False, False, False], 2) == [0, 2]
    assert failed_groups([True, True, False, True], 2) == []


def test_the_last_row_of_each_chosen_group_is_replaced_and_marked():
    samples = [SimpleNamespace(completion_ids=[10 + i], prompt_ids=[i // 2]) for i in range(6)]
    out = into_last_rows(samples, {0: [7, 7], 2: [8]}, 2, "mark")
    assert out.completion_ids == [[10], [7, 7], [12], [13], [14], [8]]
    assert out.prompt_ids == [[0], [0], [1], [1], [2], [2]]  # trained on the prompt its group was asked
    assert out.columns == {"mark": [False, True, False, False, False, True]}
