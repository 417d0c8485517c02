"""stackrl.rewards.reference_answers: what a plugin that judges by the reference answers reads, and its refusal
of a label-free batch."""

import pytest

from stackrl import PluginError
from stackrl.rewards import reference_answers


def test_the_answer_column_is_read_and_its_absence_names_the_key_the_purpose_and_the_label_free_run():
    columns = {"answer": ["4", "7"], "solution": ["...", "..."]}
    assert reference_answers(columns, "answer", plugin="rrr", purpose="tell failed attempts by") == ["4", "7"]
    with pytest.raises(PluginError) as refused:
        reference_answers({"solution": ["..."]}, "answer", plugin="rrr", purpose="tell failed attempts by")
    assert str(refused.value) == (
        "rrr.answer_column: the batch has no column 'answer' to tell failed attempts by (a label-free run hides it)"
    )
