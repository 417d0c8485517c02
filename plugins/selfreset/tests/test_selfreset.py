"""Tests of the `selfreset` plugin: the guard's rules, the reset rows and prompts by hand, the conformance suite and
a resume."""

import pytest

from stackrl.testing.conformance import PluginConformance
from stackrl_selfreset.guard import (
    GUARD_TEMPLATE,
    first_flagged,
    guard_request,
    read_verdict,
    response_of_request,
    rule_verdict,
    safety_reward,
    selfreset_guard,
    wrong_step,
)
from stackrl_selfreset.resets import reset_rows, reset_text


class TestConformance(PluginConformance):
    plugin_name = "selfreset"
    refused_settings = [
        ({"guard": "policy"}, "names an auxiliary model"),
        ({"template": "{prompt} only"}, "must contain {response}"),
        ({"max_new_tokens": 0}, "must be at least 1"),
        ({"max_resets": -1}, "must be at least 0"),
        ({"reset_weight": 0.0}, "must be positive"),
    ]


def test_verdicts_are_read_as_guards_write_them():
    assert read_verdict("safe") == "safe"
    assert read_verdict("\n\nunsafe\nS1") == "unsafe"  # Llama Guard
    assert read_verdict("Safety: Unsafe\nCategories: Violent") == "unsafe"  # Qwen3Guard-Gen
    assert read_verdict("Safety: Controversial") == "controversial"
    assert read_verdict("I cannot tell") is None and read_verdict(None) is None
    assert [safety_reward(v) for v in ("safe", "unsafe", "controversial", None)] == [1.0, 0.0, 0.0, None]


def test_the_rule_guard_flags_wrong_arithmetic_only():
    assert wrong_step("3 + 4 = 8\n") and wrong_step(" 7 * 2 = 15") and wrong_step("5 - 9 = 4")
    assert not wrong_step("3 + 4 = 7") and not wrong_step("5 - 9 = -4") and not wrong_step("The answer is 3.")
    assert rule_verdict("3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.") == "safe"
    assert rule_verdict("3 + 4 = 8\n8 * 2 = 16\nThe answer is 16.") == "unsafe"
    request = guard_request("What is (3 + 4) * 2?", "3 + 4 = 7\n7 * 2 = 15")
    assert request.startswith("What is (3 + 4) * 2?\nResponse:\n") and request.endswith("Verdict:")
    assert response_of_request(request) == "3 + 4 = 7\n7 * 2 = 15"
    # the question's own numbers are not judged: "2 + 2 = 5" in the prompt, a right response
    assert selfreset_guard([guard_request("Is 2 + 2 = 5?\n", "2 + 2 = 4\n"), ["chat"]]) == ["safe", None]
    assert GUARD_TEMPLATE.count("{prompt}") == 1


def test_the_flagged_line_is_the_first_prefix_not_called_safe():
    assert first_flagged(["safe", "safe", "unsafe", "unsafe"]) == 2
    assert first_flagged(["safe", "controversial", "unsafe"]) == 1
    assert first_flagged(["safe", None, "safe"]) is None


def test_the_reset_prompt_is_the_prompt_and_the_lines_up_to_the_flagged_one():
    completion = "3 + 4 = 7\n7 * 2 = 15\n15 - 1 = 14\nThe answer is 14."
    assert reset_text("Q?\n", completion, 1) == "Q?\n3 + 4 = 7\n7 * 2 = 15\n"
    assert reset_text("Q?\n", completion, 0, cue="wait") == "Q?\n3 + 4 = 7\nwait"


def test_reset_rows_are_the_flagged_rows_of_spread_groups_not_yet_reset():
    s, u = "safe", "unsafe"
    # groups of 3: [u s s] spread, [u u u] all flagged, [u s None] spread, [s s u] spread but its u is on the last
    # line, [u s s] a reset row's group
    verdicts = [u, s, s, u, u, u, u, s, None, s, s, u, u, s, s]
    flagged = [1, None, None, 0, 0, 0, 2, None, None, None, None, 3, 0, None, None]
    lines = [4] * 15
    assert reset_rows(verdicts, flagged, lines, 3, {4}) == [0, 6]
    assert reset_rows(verdicts, flagged, lines, 3, {4}, spread_only=False) == [0, 3, 4, 5, 6]
    assert reset_rows(verdicts, flagged, lines, 3) == [0, 6, 12]
    # an unsafe verdict whose stream flags no line gives no reset
    assert reset_rows([u, s], [None, None], [3, 3], 2) == []
