"""The built-in task's roles: judge and retry prompts, slipped attempts, verdicts."""

from __future__ import annotations

import random

import pytest

from stackrl import tasks
from stackrl.rewards import exact_match
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset
from stackrl.tasks.roles import (
    JUDGE_MARKER,
    RETRY_INSTRUCTION,
    checked_retry_prompt,
    judge_prompt,
    judge_reply,
    judged_wrong_step,
    parse_verdict,
    redone_step,
    retry_prompt,
    slip,
)

QUESTION, SOLUTION = "What is (3 + 4) * 2?\n", "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."


def test_prompts_are_the_documented_strings():
    assert judge_prompt(QUESTION, SOLUTION) == QUESTION + SOLUTION + "\nCheck:\n"
    assert retry_prompt(QUESTION, SOLUTION) == QUESTION + SOLUTION + "\nTry again.\n"
    check = "3 + 4 = 7 | 8 no\nVerdict: wrong"
    assert checked_retry_prompt(QUESTION, SOLUTION, check) == QUESTION + SOLUTION + "\nCheck:\n" + check + "\nTry again.\n"
    assert JUDGE_MARKER == "Check:" and RETRY_INSTRUCTION == "Try again."
    assert (tasks.CORRECT, tasks.WRONG) == ("correct", "wrong")
    assert tasks.judge_prompt is judge_prompt and tasks.slip is slip and tasks.checked_retry_prompt is checked_retry_prompt


def test_judge_reply_stops_at_the_first_wrong_line():
    assert judge_reply(SOLUTION) == "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 14 yes\n14 | 14 yes\nVerdict: correct"
    assert judge_reply("3 + 4 = 8\n8 * 2 = 16\nThe answer is 16.") == "3 + 4 = 7 | 8 no\nVerdict: wrong"
    wrong_answer = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 15."
    assert judge_reply(wrong_answer) == "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 14 yes\n14 | 15 no\nVerdict: wrong"
    assert (tasks.SAME, tasks.DIFFERENT) == ("yes", "no") and tasks.compare_line(12, 12) == "12 | 12 yes"


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("3 + 4 = 7\nVerdict: correct", True),
        ("3 + 4 = 8\nVerdict: wrong", False),
        ("Verdict:wrong\nVerdict: correct", False),  # the first verdict counts
        ("3 + 4 = 7\nThe answer is 7.", None),
        ("Verdict: maybe", None),
        ("", None),
    ],
)
def test_parse_verdict(reply, verdict):
    assert parse_verdict(reply) is verdict


def _slipped_lines(solution: str, slipped: str) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(solution.split("\n"), slipped.split("\n"))) if a != b]


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_slip_is_one_small_mistake_carried_on(category):
    rng = random.Random(0)
    places = set()
    for row in make_dataset("train", 60, seed=0, categories=[category]):
        slipped = slip(row["solution"], rng)
        assert not exact_match(slipped, row["answer"])
        assert parse_verdict(judge_reply(slipped)) is False
        assert parse_verdict(judge_reply(row["solution"])) is True
        changed = _slipped_lines(row["solution"], slipped)
        places.add(changed[0])
        lines = slipped.split("\n")
        # Only the first changed line is a wrong step: its result moved by at most 10, and every later step is
        # right for the value carried on, so the check stops exactly there.
        assert len(judge_reply(slipped).split("\n")) == changed[0] + 2
        if changed[0] < len(lines) - 1:
            moved = int(lines[changed[0]].rsplit("= ", 1)[1]) - int(row["solution"].split("\n")[changed[0]].rsplit("= ", 1)[1])
            assert 0 < abs(moved) <= 10
        assert all(int(n) >= 0 for line in lines for n in line.replace(".", "").split() if n.isdigit())
    assert places == set(range(int(category.split()[0]) + 1))  # every step and the final line get slips


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_perfect_check_of_a_slip_gives_the_slipped_step_written_as_the_solution_writes_it(category):
    rng = random.Random(1)
    for row in make_dataset("train", 30, seed=0, categories=[category]):
        slipped = slip(row["solution"], rng)
        where = _slipped_lines(row["solution"], slipped)[0]
        steps = len(slipped.split("\n"))
        assert judged_wrong_step(judge_reply(slipped), steps) == where
        assert redone_step(judge_reply(slipped), steps) == (where, row["solution"].split("\n")[where])
        assert redone_step(judge_reply(row["solution"]), steps) is None  # "correct": nothing to redo


def test_a_check_without_a_wrong_verdict_or_a_readable_line_redoes_no_step():
    assert redone_step("3 + 4 = 7 | 7 yes", 3) is None  # no verdict
    assert redone_step("1 + 1 = 2\n2 + 2 = 4\n4 + 4 = 8\nVerdict: wrong", 2) is None  # more lines than steps
    assert redone_step("three | 8 no\nVerdict: wrong", 3) is None  # neither a step nor a number
    assert judged_wrong_step("three | 8 no\nVerdict: wrong", 3) == 0


def test_slip_is_deterministic_per_rng():
    assert slip(SOLUTION, random.Random(5)) == slip(SOLUTION, random.Random(5))


def test_malformed_attempts_are_refused_with_the_line():
    with pytest.raises(ValueError, match="'3 plus 4 is 7'"):
        slip("3 plus 4 is 7\nThe answer is 7.", random.Random(0))
    with pytest.raises(ValueError, match="final line.*'So 7.'"):
        judge_reply("3 + 4 = 7\nSo 7.")
