"""The roles stackrl/arith-roles adds to the built-in task, on hand-built cases: corrupting a solution
(stackrl.tasks.roles), its states and transitions (stackrl.tasks.transitions), decomposing a question for a solver
and the detector of planted results (stackrl.tasks.decomposition), their figures (stackrl.tasks.skills) and the
training examples of each (stackrl.tasks.pretrain_roles)."""

from __future__ import annotations

import random

import pytest

from stackrl.tasks.arithmetic import make_dataset
from stackrl.tasks.decomposition import (
    decompose, decompose_prompt, planted_numbers, plants_answer, read_decomposition, solve_decomposition,
    solve_prompt, well_formed,
)
from stackrl.tasks.roles import corrupt_prompt, slip, wrong_lines
from stackrl.tasks.transitions import (
    action_between, actions, forward_prompt, inverse_prompt, next_state, read_state, states, transitions,
)

QUESTION = "What is ((3 + 4) * 2) - 5?\n"
SOLUTION = "3 + 4 = 7\n7 * 2 = 14\n14 - 5 = 9\nThe answer is 9."


def test_a_question_is_reduced_one_operation_at_a_time():
    assert states(QUESTION) == ["((3 + 4) * 2) - 5", "(7 * 2) - 5", "14 - 5", "9"]
    assert actions(SOLUTION) == ["3 + 4 = 7", "7 * 2 = 14", "14 - 5 = 9"]
    assert transitions(QUESTION, SOLUTION)[1] == ("(7 * 2) - 5", "7 * 2 = 14", "14 - 5")
    assert forward_prompt("14 - 5", "14 - 5 = 9") == "State: 14 - 5\nAction: 14 - 5 = 9\nNext state:\n"
    assert inverse_prompt("14 - 5", "9") == "State: 14 - 5\nNext state: 9\nAction:\n"


def test_the_world_rules_apply_only_the_first_operation_done_right():
    assert next_state("(7 * 2) - 5", "7 * 2 = 14") == "14 - 5"
    assert next_state("(7 * 2) - 5", "7 * 2 = 15") is None  # a wrong result
    assert next_state("(7 * 2) - 5", "14 - 5 = 9") is None  # not the first operation
    assert next_state("9", "9 + 1 = 10") is None  # nothing left to do
    assert action_between("(7 * 2) - 5", "14 - 5") == "7 * 2 = 14"
    assert action_between("(7 * 2) - 5", "15 - 5") is None
    assert action_between("((3 + 4) * 2) - 5", "14 - 5") is None  # two steps at once
    assert read_state("(7 * 2) - 5") == (7, [("*", 2), ("-", 5)])
    assert read_state("7 * 2 - 5") is None and read_state("(7 * 2)") is None and read_state("x") is None


def test_every_transition_of_the_task_follows_the_rules():
    for row in make_dataset("test", 60, seed=1):
        path = states(row["question"])
        assert path[-1] == row["answer"]
        for state, action, following in transitions(row["question"], row["solution"]):
            assert next_state(state, action) == following and action_between(state, following) == action


def test_a_decomposition_names_each_earlier_result():
    assert decompose(QUESTION) == "A = 3 + 4\nB = A * 2\nC = B - 5"
    assert decompose(QUESTION, planted=True) == "A = 3 + 4 = 7\nB = A * 2 = 14\nC = B - 5 = 9"
    assert decompose_prompt(QUESTION) == QUESTION + "Decompose:\n"
    assert solve_prompt("A = 3 + 4\nB = A * 2\n") == "A = 3 + 4\nB = A * 2\nSolve:\n"
    reply = "A = 3 + 4 = 7\nB = 7 * 2 = 14\nC = 14 - 5 = 9\nThe answer is 9."
    assert solve_decomposition(decompose(QUESTION)) == solve_decomposition(decompose(QUESTION, True)) == reply
    assert solve_decomposition("A = 3 + 4\nB = C * 2") is None  # C is not defined yet
    assert read_decomposition("A = 3 + 4\nwhat next") is None


@pytest.mark.parametrize(("text", "formed", "planted"), [
    ("A = 3 + 4\nB = A * 2\nC = B - 5", True, []),
    ("A = 3 + 4 = 7\nB = A * 2\nC = B - 5", True, [7]),  # a result written after its line
    ("A = 3 + 4\nB = 7 * 2\nC = B - 5", True, [7]),  # a name replaced by its value
    ("A = 3 + 4\nB = A * 2\nC = B - 5\nD = 9", False, [9]),  # the answer in an extra line
    ("A = 3 + 4\nB = A * 2", False, []),  # a line short
    ("A = 3 + 4\nB = A * 3\nC = B - 5", False, [3]),  # the wrong operand (3 is written once in the question)
    ("B = 3 + 4\nA = B * 2\nC = A - 5", False, []),  # names out of order
])
def test_the_detector_finds_every_number_the_question_does_not_write(text, formed, planted):
    assert well_formed(QUESTION, text) is formed
    assert planted_numbers(QUESTION, text) == planted and plants_answer(QUESTION, text) is bool(planted)


def test_a_result_that_is_also_an_operand_is_counted_as_often_as_written():
    question = "What is (3 + 4) - 7?\n"
    assert not plants_answer(question, "A = 3 + 4\nB = A - 7")
    assert planted_numbers(question, "A = 3 + 4\nB = 7 - 7") == [7]


def test_a_corrupted_solution_has_exactly_one_wrong_line():
    assert corrupt_prompt(QUESTION, SOLUTION) == QUESTION + SOLUTION + "\nCorrupt:\n"
    assert wrong_lines(QUESTION, SOLUTION) == 0
    assert wrong_lines(QUESTION, SOLUTION.replace("= 14\n14", "= 15\n15").replace("= 9\nThe answer is 9", "= 10\nThe answer is 10")) == 1
    assert wrong_lines(QUESTION, SOLUTION.replace("is 9.", "is 8.")) == 1
    assert wrong_lines(QUESTION, "3 + 4 = 8\n7 * 2 = 14\n14 - 5 = 9\nThe answer is 9.") is None  # a value not carried
    assert wrong_lines(QUESTION, "3 + 4 = 8\n8 * 2 = 15\n15 - 5 = 10\nThe answer is 10.") == 2
    assert wrong_lines(QUESTION, "3 + 4 = 7\n7 * 3 = 21\n21 - 5 = 16\nThe answer is 16.") is None  # another chain
    assert wrong_lines(QUESTION, "3 + 4 = 7\nThe answer is 7.") is None and wrong_lines(QUESTION, "7") is None
    rng = random.Random(0)
    for row in make_dataset("test", 60, seed=2):
        assert wrong_lines(row["question"], slip(row["solution"], rng)) == 1


def test_the_figures_of_hand_written_replies():
    from stackrl.tasks.skills import corrupt_figures, decompose_figures, transition_figures

    corrupted = [SOLUTION.replace("is 9.", "is 8."), SOLUTION, "nonsense", SOLUTION.replace("is 9.", "is 10.")]
    figures = corrupt_figures([QUESTION] * 4, corrupted, [False, False, None, True], ["a", "a", "b", "b"])
    assert figures["well_formed"] == 0.75 and figures["one_wrong"] == 0.5 and figures["unchanged"] == 0.25
    assert figures["judge_missed"] == 0.5 and figures["one_wrong_replies"] == 2
    assert figures["by_category"] == {"a": {"one_wrong": 0.5, "judge_missed": 0.0},
                                      "b": {"one_wrong": 0.5, "judge_missed": 1.0}}
    moved = transition_figures(["14 - 5", "14 - 5 "], ["14 - 5", "9"], ["7 * 2 = 14"] * 2, ["7 * 2 = 14"] * 2)
    assert moved["forward"]["all"] == 0.5 and moved["inverse"]["all"] == 1.0 and moved["transitions"] == 2
    replies = [decompose(QUESTION), decompose(QUESTION, planted=True), "A = 3"]
    split = decompose_figures([QUESTION] * 3, replies, [1, 1, 0], [1, 1, 1], [1, 0, 0])
    assert split["well_formed"]["all"] == pytest.approx(2 / 3) and split["planted"]["all"] == pytest.approx(1 / 3)
    assert split["faithful"]["all"] == pytest.approx(1 / 3) and split["solver_from_planted"]["all"] == 1.0


def test_the_new_roles_are_taught_in_their_formats():
    """Each new role's examples, decoded: the prompt and target as the formats lay them out, and the earlier roles
    still drawn."""
    from transformers import AutoTokenizer

    from stackrl.tasks import arith_skills_path
    from stackrl.tasks.pretrain_roles import _roles_batches

    tokenizer = AutoTokenizer.from_pretrained(arith_skills_path())
    problems = make_dataset("train", 30, seed=0)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    for role, marker in [("corrupt", "\nCorrupt:\n"), ("forward", "\nNext state:\n"), ("inverse", "\nAction:\n"),
                         ("decompose", "?\nDecompose:\n"), ("subsolve", "\nSolve:\n")]:
        batch = next(_roles_batches(tokenizer, problems, random.Random(0), 16, {role: 1.0}))
        for prompt, target in batch:
            prompt, target = decode(prompt), decode(target)
            assert prompt.endswith(marker), role
            if role == "corrupt":
                assert wrong_lines(prompt.split("\n")[0] + "\n", target) == 1
            elif role == "forward":
                state, action = (line.split(": ", 1)[1] for line in prompt.split("\n")[:2])
                assert next_state(state, action) == target
            elif role == "inverse":
                state, following = (line.split(": ", 1)[1] for line in prompt.split("\n")[:2])
                assert action_between(state, following) == target
            elif role == "decompose":
                assert well_formed(prompt.split("\n")[0] + "\n", target)
            else:
                assert target == solve_decomposition(prompt.removesuffix("\nSolve:\n"))
    mixed = next(_roles_batches(tokenizer, problems, random.Random(0), 64, {"judge": 1.0, "forward": 1.0}))
    texts = [decode(prompt) for prompt, _ in mixed]
    assert 10 < sum(t.endswith("Check:\n") for t in texts) < 54 and 10 < sum(t.startswith("State:") for t in texts) < 54



def test_a_snapshot_is_the_run_that_stops_there(tmp_path):
    """What lets the shipped checkpoint be a snapshot (finish_snapshot): a run of k steps makes the same weights."""
    import json

    from safetensors.torch import load_file

    from stackrl.tasks import arith_skills_path
    from stackrl.tasks.pretrain import RECORD_FILE, recipe_hash
    from stackrl.tasks.pretrain_roles import RECIPE, finish_snapshot, pretrain_roles

    quick = dict(init=arith_skills_path(), batch_size=4, train_size=50, eval_per_category=1, redo_problems=6,
                 threads=1, warmup=2)
    pretrain_roles(tmp_path / "long", steps=3, save_every=2, **quick)
    pretrain_roles(tmp_path / "short", steps=2, **quick)
    snapshot, short = tmp_path / "long-roles2", tmp_path / "short"
    finish_snapshot(snapshot, train_seconds=1)
    record, made = (json.loads((folder / RECORD_FILE).read_text()) for folder in (snapshot, short))
    assert record["snapshot"]["of_steps"] == 3 and record["settings"]["steps"] == made["settings"]["steps"] == 2
    assert record["summary"]["roles"] == made["summary"]["roles"] and record["recipe_sha256"] == recipe_hash(RECIPE)
    weights = load_file(snapshot / "model.safetensors")
    assert all((weights[k] == v).all() for k, v in load_file(short / "model.safetensors").items())
