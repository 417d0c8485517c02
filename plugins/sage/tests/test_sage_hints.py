"""Hints: parsing the policy's answers, cutting hints from a solution, and the cache's retries and fallback."""

import json
from dataclasses import dataclass, field

import pytest

from stackrl import ConfigError, Generation
from stackrl_sage import SageConfig, parse_hints, solution_hints
from stackrl_sage.hints import HintBank, Problem, fill, prompt_text, with_text

HINTS = {"level_1": "Think about parity.", "level_2": "Split into even and odd cases.", "level_3": "For n even, ..."}
WANT = list(HINTS.values())


# -- parsing ---------------------------------------------------------------------------------------------------------


def test_well_formed_json():
    assert parse_hints(json.dumps(HINTS)) == WANT


def test_fenced_json_with_stray_text_around_it():
    text = f"Sure! Here are the hints.\n```json\n{json.dumps(HINTS, indent=2)}\n```\nGood luck {{really}}."
    assert parse_hints(text) == WANT


def test_fence_cut_off_before_its_end():
    assert parse_hints(f"```json\n{json.dumps(HINTS)}") == WANT


def test_truncated_after_the_last_value_is_recovered():
    text = json.dumps(HINTS)[:-1]  # the closing brace never came
    assert parse_hints(text) == WANT


def test_truncated_inside_a_value_keeps_the_complete_levels():
    text = json.dumps(HINTS)
    assert parse_hints(text[: text.index("For n even") + 5]) == [*WANT[:2], None]


@pytest.mark.parametrize(
    "text, want",
    [
        ('{"level_1": "only one"}', ["only one", None, None]),
        ('{"level_1": "a", "level_2": "", "level_3": "c"}', ["a", None, "c"]),
        ('{"level_1": "a", "level_2": 2, "level_3": "c"}', ["a", None, "c"]),
    ],
)
def test_a_partial_answer_keeps_the_levels_it_holds(text, want):
    assert parse_hints(text) == want


def test_latex_written_with_single_backslashes_keeps_them():
    text = '{"level_1": "Use \\frac{a}{b}.", "level_2": "Then \\times \\beta.", "level_3": "Set x = 2,\\ny = 3"}'
    assert parse_hints(text) == ["Use \\frac{a}{b}.", "Then \\times \\beta.", "Set x = 2,\ny = 3"]
    assert parse_hints(json.dumps({**HINTS, "level_1": "\\frac{1}{2}"}))[0] == "\\frac{1}{2}"  # escaped properly


def test_trailing_comma_and_single_quoted_keys_are_tolerated():
    text = "{'level_1': \"a\", 'level_2': \"b\", 'level_3': \"c\",}"
    assert parse_hints(text) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I cannot help with that.",
        "{not json at all",
        '{"hint": "a", "level_4": "b"}',
        '{"level_1": "", "level_2": 2, "level_3": null}',
        '["level_1", "level_2", "level_3"]',
    ],
)
def test_answers_without_any_hint_are_refused(text):
    assert parse_hints(text) is None


# -- hints cut from a solution ---------------------------------------------------------------------------------------


def test_solution_hints_reveal_a_growing_prefix_never_the_last_step():
    four = "1 + 2 = 3\n3 * 4 = 12\n12 - 5 = 7\n7 + 1 = 8\nThe answer is 8."
    assert solution_hints(four) == ["1 + 2 = 3", "1 + 2 = 3\n3 * 4 = 12", "1 + 2 = 3\n3 * 4 = 12\n12 - 5 = 7"]
    three = "1 + 2 = 3\n3 * 4 = 12\n12 - 5 = 7\nThe answer is 7."
    assert solution_hints(three) == ["1 + 2 = 3", "1 + 2 = 3\n3 * 4 = 12", "1 + 2 = 3\n3 * 4 = 12"]
    assert solution_hints("1 + 2 = 3\n3 * 4 = 12\nThe answer is 12.") == ["1 + 2 = 3"] * 3


def test_solution_too_short_to_hint_from():
    assert solution_hints("1 + 2 = 3\nThe answer is 3.") is None
    assert solution_hints("") is None


# -- prompts ---------------------------------------------------------------------------------------------------------


def test_a_chat_prompt_gets_its_hint_in_its_last_user_message():
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
    assert prompt_text(chat) == "What is 2 + 2?"
    hinted = with_text(chat, "What is 2 + 2?\nHint: add.")
    assert hinted == [chat[0], {"role": "user", "content": "What is 2 + 2?\nHint: add."}]
    assert chat[1]["content"] == "What is 2 + 2?"  # the dataset's prompt is left as it was


def test_a_template_naming_an_unknown_field_names_the_key():
    with pytest.raises(ConfigError, match=r"sage\.hinted_prompt_template names the field 'question'"):
        fill("{question} {hint}", "hinted_prompt_template", {"prompt": "p", "hint": "h"})


# -- the cache -------------------------------------------------------------------------------------------------------
# The policy's side of these tests is scripted: no model small enough for a unit test writes JSON hints.


@dataclass
class ScriptedContext:
    """Answers each generate call with the next list of texts; records the calls."""

    answers: list
    step: int = 0
    calls: list = field(default_factory=list)
    logged: dict = field(default_factory=dict)

    def generate(self, prompts, **sampling):
        self.calls.append((len(prompts), sampling))
        texts = self.answers.pop(0)
        assert len(texts) == len(prompts)
        return [Generation([], [], text) for text in texts]

    def log(self, name, value):
        self.logged[name] = value


def problems(*names):
    return [Problem(key=n, text=f"problem {n}", solution=f"solution {n}", columns={}) for n in names]


def test_hints_are_written_in_one_batch_and_only_failures_retried_three_attempts_in_all():
    bank = HintBank(SageConfig())
    partial = json.dumps({"level_2": "Split into cases."})
    ctx = ScriptedContext([[json.dumps(HINTS), "garbage", "garbage"], [partial, "garbage"], ["garbage"]])
    got = bank.lookup(problems("a", "b", "c"), ctx)
    assert got == [WANT, [None, "Split into cases.", None], [None] * 3]
    assert [n for n, _ in ctx.calls] == [3, 2, 1]
    # Greedy every time, within the rollout's completion budget (no override), as the authors.
    assert [sampling for _, sampling in ctx.calls] == [{"do_sample": False}] * 3
    assert ctx.logged["hint_failures"] == 1


def test_retries_can_sample_and_the_budget_can_be_set():
    bank = HintBank(SageConfig(hint_attempts=2, retry_temperature=1.0, hint_max_new_tokens=64))
    ctx = ScriptedContext([["garbage"], ["garbage"]])
    assert bank.lookup(problems("a"), ctx) == [[None] * 3]
    assert [sampling for _, sampling in ctx.calls] == [
        {"do_sample": False, "max_new_tokens": 64},
        {"do_sample": True, "temperature": 1.0, "max_new_tokens": 64},
    ]


def test_a_prompt_asked_twice_in_a_batch_is_written_once():
    ctx = ScriptedContext([[json.dumps(HINTS)]])
    assert HintBank(SageConfig()).lookup(problems("a", "a"), ctx) == [WANT, WANT]
    assert [n for n, _ in ctx.calls] == [1]


def test_the_request_carries_the_problem_and_its_solution():
    bank = HintBank(SageConfig())
    ctx = ScriptedContext([[json.dumps(HINTS)]])
    captured = []
    ctx.generate = lambda prompts, **s: captured.extend(prompts) or [Generation([], [], json.dumps(HINTS))]
    bank.lookup(problems("a"), ctx)
    system, user = captured[0]
    assert system["role"] == "system" and "level_1" in system["content"]
    assert user == {"role": "user", "content": "Question:\nproblem a\n\nSolution:\nsolution a\n"}


def test_fresh_hints_are_reused_stale_ones_rewritten_and_failures_fall_back():
    bank = HintBank(SageConfig(hint_refresh_steps=2, hint_attempts=1))
    newer = {**HINTS, "level_1": "Newer."}
    ctx = ScriptedContext([[json.dumps(HINTS)], ["garbage"], [json.dumps(newer)]])
    assert bank.lookup(problems("a"), ctx) == [WANT]
    ctx.step = 1
    assert bank.lookup(problems("a"), ctx) == [WANT] and len(ctx.calls) == 1  # still fresh: no request
    ctx.step = 2
    assert bank.lookup(problems("a"), ctx) == [WANT]  # stale, rewriting failed: the last good hints
    assert bank.entries["a"]["step"] == 0
    ctx.step = 3
    assert bank.lookup(problems("a"), ctx) == [["Newer.", *WANT[1:]]]
    assert bank.entries["a"]["step"] == 3


def test_refresh_zero_keeps_good_hints_for_ever():
    bank = HintBank(SageConfig(hint_refresh_steps=0))
    ctx = ScriptedContext([[json.dumps(HINTS)]])
    bank.lookup(problems("a"), ctx)
    ctx.step = 1000
    assert bank.lookup(problems("a"), ctx) == [WANT] and len(ctx.calls) == 1


def test_solution_source_needs_no_policy():
    bank = HintBank(SageConfig(hint_source="solution"))
    three = Problem("a", "q", "1 + 2 = 3\n3 * 4 = 12\n12 - 5 = 7\nThe answer is 7.", {})
    short = Problem("b", "q", "The answer is 7.", {})
    ctx = ScriptedContext([])
    assert bank.lookup([three, short], ctx) == [solution_hints(three.solution), [None] * 3]
    assert ctx.calls == [] and ctx.logged["hint_failures"] == 1
