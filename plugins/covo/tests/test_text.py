"""Steps and answers read from completion text, by the authors' rules."""

import pytest

from stackrl_covo.answers import cluster, make_extractor, normalise
from stackrl_covo.config import Extractor
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


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        (Extractor.boxed, "so \\boxed{\\frac{1}{2}} and \\boxed{3}", "\\boxed{3}"),
        (Extractor.boxed, "\\boxed{\\frac{1}{2}}.", "\\boxed{\\frac{1}{2}}"),
        (Extractor.boxed, "\\boxed{unclosed", None),
        (Extractor.answer_is, "3 + 4 = 7\nThe answer is 7.", "7"),
        (Extractor.answer_is, "The answer is: 12\nno", "12"),
        (Extractor.auto, "The answer is 7. \\boxed{8}", "\\boxed{8}"),
        (Extractor.auto, "nothing here", None),
    ],
)
def test_extractors(kind, text, expected):
    assert make_extractor(kind)(text) == expected


def test_regex_extractor_takes_the_last_match_and_its_group():
    assert make_extractor(Extractor.regex, r"#### (\S+)")("#### 3\n#### 4") == "4"
    assert make_extractor(Extractor.regex, r"\d+")("a 3 b 45") == "45"


def test_clustering_by_content_in_order_of_first_appearance():
    answers = ["\\boxed{1,000}", None, "\\boxed{1000}", "\\boxed{\\dfrac{1}{2}}", "\\boxed{\\frac12}", "x = 1000"]
    assert normalise("\\boxed{\\left( 1, 2 \\right)}") == "(1,2)"
    index, distinct = cluster(answers, use_math_verify=False)
    assert index == [0, None, 0, 1, 2, 0]
    assert distinct == ["\\boxed{1,000}", "\\boxed{\\dfrac{1}{2}}", "\\boxed{\\frac12}"]
    index, distinct = cluster(answers, use_math_verify=True)  # \frac12 is 1/2 for math-verify
    assert index == [0, None, 0, 1, 1, 0]
