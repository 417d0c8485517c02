"""Steps read from completion text, by the authors' rules (answers: the host's block, tests/test_answers.py)."""

from stackrl_covo.steps import split_steps


def texts_of(text, spans):
    return [text[a:b] for a, b in spans]


def test_steps_are_non_empty_lines_without_surrounding_space():
    text = "  3 + 4 = 7\n\n7 * 2 = 14  \nThe answer is 14."
    assert texts_of(text, split_steps(text)) == ["3 + 4 = 7", "7 * 2 = 14", "The answer is 14."]


def test_display_math_is_one_step_and_an_unclosed_block_stays_line_by_line():
    text = "We have\n\\[\nx = 1\n\\]\nso \\[ y \\] holds\n\\[ open\nz"
    assert texts_of(text, split_steps(text)) == ["We have", "\\[\nx = 1\n\\]", "so \\[ y \\] holds", "\\[ open", "z"]


def test_many_steps_merge_after_colons_then_into_chunks():
    colon = "\n".join(["Step:", "a"] * 8)  # 16 lines, 8 after the colon merge
    assert texts_of(colon, split_steps(colon)) == ["Step:\na"] * 8
    lines = [f"line {i}" for i in range(32)]
    chunks = texts_of("\n".join(lines), split_steps("\n".join(lines)))
    assert len(chunks) == 15 and [c.count("\n") + 1 for c in chunks] == [2] * 13 + [3] * 2  # shorter chunks first
    assert split_steps("\n".join(lines[:14])) == split_steps("\n".join(lines[:14]), max_steps=15)
    assert len(split_steps("\n".join(lines[:14]))) == 14
