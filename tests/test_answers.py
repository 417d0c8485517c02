"""The answers block: extraction from messy text, normalisation, clustering and group statistics."""

import math
import re
from pathlib import Path

import pytest

from stackrl.answers import Extractor, equivalent, extract_answer, group_answers, groups_of, make_extractor, normalise


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        (Extractor.boxed, "so \\boxed{\\frac{1}{2}} and \\boxed{3}", "\\boxed{3}"),
        (Extractor.boxed, "\\boxed{\\frac{\\sqrt{2}}{2}}.", "\\boxed{\\frac{\\sqrt{2}}{2}}"),
        (Extractor.boxed, "\\boxed{unclosed", None),
        (Extractor.boxed, "only \\fbox{7} here", "\\fbox{7}"),
        (Extractor.answer_is, "3 + 4 = 7\nThe answer is 7.", "7"),
        (Extractor.answer_is, "The answer is: 12\nno", "12"),
        (Extractor.answer_is, "The answer is 5.\nWait. So the ANSWER IS $-3$.", "-3"),
        (Extractor.answer_is, "no phrase, 42", None),
        (Extractor.last_number, "7 * 2 = 14, then 14 - 20 = -6.", "-6"),
        (Extractor.last_number, "She paid $1,250.50 in total.", "1,250.50"),
        (Extractor.last_number, "no digits", None),
        (Extractor.auto, "The answer is 7. \\boxed{8}", "\\boxed{8}"),
        (Extractor.auto, "3 + 4 = 7\nThe answer is 7.", "7"),
        (Extractor.auto, "nothing here", None),
    ],
)
def test_extractors_read_the_last_stated_answer(kind, text, expected):
    assert make_extractor(kind)(text) == expected


def test_the_regex_extractor_takes_the_last_match_and_its_group():
    assert make_extractor("regex", r"#### (\S+)")("#### 3\n#### 4") == "4"
    assert make_extractor(Extractor.regex, r"\d+")("a 3 b 45") == "45"
    assert make_extractor(Extractor.regex, r"#### (\S+)")("none") is None
    with pytest.raises(ValueError, match="pattern"):
        make_extractor(Extractor.regex)
    with pytest.raises(ValueError, match="pattern"):
        make_extractor(Extractor.boxed, r"\d+")


def test_extract_answer_gives_the_boxed_content_or_the_phrase():
    assert extract_answer("so \\boxed{\\frac{1}{2}} and \\boxed{ 3 }") == "3"
    assert extract_answer("\\boxed{\\frac{a}{\\sqrt{b}}}") == "\\frac{a}{\\sqrt{b}}"  # nested braces kept whole
    assert extract_answer("1 + 1 = 2\nThe answer is 2.") == "2"
    assert extract_answer("I am not sure.") is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("\\boxed{1,000}", "1000"),
        ("x = 5", "5"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("\\dfrac{1}{2}", "\\frac{1}{2}"),
        ("30^\\circ", "30"),
        ("12.", "12"),
        ("$7$", "7"),
    ],
)
def test_normalisation_makes_these_equal(a, b):
    assert normalise(a) == normalise(b)
    assert equivalent(a, b, math_verify=False)


def test_normalisation_keeps_these_apart():
    assert normalise("(1,2)") != normalise("12")  # a comma that is no thousands separator stays
    assert normalise("-3") != normalise("3")
    assert not equivalent("0.5", "\\frac{1}{2}", math_verify=False)
    assert equivalent("0.5", "\\frac{1}{2}")  # math-verify reads them as one value
    assert not equivalent("0.5", "\\frac{1}{3}")


def test_clustering_by_content_in_order_of_first_appearance():
    answers = ["\\boxed{1,000}", None, "\\boxed{1000}", "\\boxed{\\dfrac{1}{2}}", "\\boxed{\\frac12}", "x = 1000"]
    group = group_answers(answers, math_verify=False)
    assert group.index == [0, None, 0, 1, 2, 0]
    assert group.distinct == ["\\boxed{1,000}", "\\boxed{\\dfrac{1}{2}}", "\\boxed{\\frac12}"]
    assert group.counts == [3, 1, 1]
    group = group_answers(answers, math_verify=True)  # \frac12 is 1/2 for math-verify
    assert group.index == [0, None, 0, 1, 1, 0]
    assert group.counts == [3, 2]


def test_group_statistics_by_hand():
    # 8 rows: "4" x3, "5" x2, "6" x1, two unanswered.
    group = group_answers(["4", "5", None, "4", "6", "5", None, "4"], math_verify=False)
    assert (group.size, group.answered) == (8, 6)
    assert group.frequencies == [3 / 8, 2 / 8, 1 / 8]
    assert (group.majority, group.majority_answer, group.majority_share) == (0, "4", 3 / 8)
    assert group.row_frequencies() == [3 / 8, 2 / 8, 0.0, 3 / 8, 1 / 8, 2 / 8, 0.0, 3 / 8]
    assert group.in_majority() == [True, False, False, True, False, False, False, True]
    assert group.entropy == pytest.approx(-(0.5 * math.log(0.5) + 1 / 3 * math.log(1 / 3) + 1 / 6 * math.log(1 / 6)))
    assert group.rare(0.2) == {2} and group.rare(0.3) == {1, 2} and group.rare(0.1) == set()


def test_a_tied_majority_goes_to_the_answer_written_first_and_an_empty_group_has_none():
    tied = group_answers(["9", "8", "8", "9"], math_verify=False)
    assert tied.majority_answer == "9" and tied.in_majority() == [True, False, False, True]
    assert tied.entropy == pytest.approx(math.log(2))
    empty = group_answers([None, None], math_verify=False)
    assert (empty.majority, empty.majority_share, empty.entropy) == (None, 0.0, 0.0)
    assert empty.in_majority() == [False, False] and empty.row_frequencies() == [0.0, 0.0]


def test_groups_of_splits_a_rollout_into_its_groups():
    groups = groups_of(["1", "2", "2", "3", None, "3"], group_size=3, math_verify=False)
    assert [g.majority_answer for g in groups] == ["2", "3"]
    assert [(g.index, g.counts) for g in groups] == [([0, 1, 1], [1, 2]), ([0, None, 0], [2])]


def test_the_example_in_the_hook_reference_holds():
    text = (Path(__file__).resolve().parents[1] / "docs" / "hooks.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "group_answers" in b)
    exec(compile(block, "docs/hooks.md", "exec"), {})


def test_a_plugins_answer_settings_are_checked_naming_its_section():
    from stackrl import ConfigError
    from stackrl.answers import AnswerSettings, extractor_of

    assert extractor_of(AnswerSettings(answer_extractor=Extractor.regex, answer_regex=r"= (\d+)"), "serl")("= 4") == "4"
    with pytest.raises(ConfigError, match=r"serl.answer_regex is needed with serl.answer_extractor: regex"):
        extractor_of(AnswerSettings(answer_extractor=Extractor.regex), "serl")
    with pytest.raises(ConfigError, match=r"dare.answer_regex is needed"):
        extractor_of(AnswerSettings(answer_regex=r"\d"), "dare")
    with pytest.raises(ConfigError, match=r"dare.answer_regex '\(' is not a valid regex"):
        extractor_of(AnswerSettings(answer_extractor=Extractor.regex, answer_regex="("), "dare")


def test_answer_settings_that_name_their_section_are_checked_when_built():
    from dataclasses import dataclass
    from typing import ClassVar

    from stackrl import ConfigError
    from stackrl.answers import AnswerSettings

    @dataclass
    class Settings(AnswerSettings):
        section: ClassVar[str] = "mine"

    with pytest.raises(ConfigError, match=r"mine.answer_regex '\(' is not a valid regex"):
        Settings(answer_extractor=Extractor.regex, answer_regex="(")
    assert Settings(answer_extractor=Extractor.regex, answer_regex=r"= (\d+)").answer_regex == r"= (\d+)"
    AnswerSettings(answer_extractor=Extractor.regex)  # no section: checked where it is used, naming the caller's


def test_the_run_has_one_answer_format_the_task_declares_or_the_data_sets():
    from stackrl import ConfigError
    from stackrl.config import DataSection
    from stackrl.data import answer_format

    assert answer_format(DataSection()) == "answer_is"  # the built-in task's "The answer is N."
    assert answer_format(DataSection(source="problems.jsonl")) == "auto"
    assert answer_format(DataSection(answer_format="boxed")) == "boxed"
    with pytest.raises(ConfigError, match="data.answer_format: 'regex' is none of boxed, answer_is, last_number, auto"):
        answer_format(DataSection(answer_format="regex"))


def test_unread_answers_hint_names_the_setting_and_what_the_answers_look_like():
    from stackrl.answers import unread_answers_hint

    texts = ["3 + 4 = 7\nThe answer is 7.", "no answer"]
    assert unread_answers_hint(texts, "boxed", "covo.answer_extractor") == (
        "covo.answer_extractor is 'boxed'; the answers look like 'The answer is 7.' ('answer_is' reads them)"
    )
    assert unread_answers_hint(["?"], "answer_is", "dare.answer_extractor") == (
        "dare.answer_extractor is 'answer_is'; no completion states an answer that any extractor reads"
    )
