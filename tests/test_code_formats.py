"""The code and SQL skills stackrl/arith-code adds, on hand-built cases: the program format and how a program is
run and judged (stackrl.tasks.programs), the text-to-SQL task, its answers worked out apart from sqlite3, and how a
query is run (stackrl.tasks.sql), and the training examples of each (stackrl.tasks.pretrain_code)."""

from __future__ import annotations

import operator
import random
import re
import time
from pathlib import Path

import pytest

from stackrl.tasks import TASKS
from stackrl.tasks import sql as sql_task
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset
from stackrl.tasks.programs import ProgramRun, code_prompt, prints_answer, run_program, write_program
from stackrl.tasks.sql import run_query, same_result

QUESTION = "What is ((3 + 4) * 2) - 5?\n"
_COMPARE = {"<": operator.lt, ">": operator.gt}


def test_a_program_works_the_chain_out_one_operation_per_line():
    assert code_prompt(QUESTION) == QUESTION + "Program:\n"
    assert write_program(QUESTION) == "a = 3 + 4\nb = a * 2\nc = b - 5\nprint(c)"
    assert write_program("What is 12 * 3?\n") == "a = 12 * 3\nprint(a)"
    for row in make_dataset("test", 2 * len(CATEGORIES), seed=0):
        assert prints_answer(run_program(write_program(row["question"])), row["answer"]), row["question"]


@pytest.mark.parametrize(("program", "right"), [
    ("print(9)", True),
    ("print(9)\n", True),
    ("print(8)", False),  # a wrong answer
    ("print(9)\nraise SystemExit(1)", False),  # the answer printed, then a failure: exit status counts
    ("print(9); print(9)", False),  # more than the answer
    ("print(", False),  # not Python
])
def test_a_program_is_right_when_it_exits_cleanly_printing_the_answer(program, right):
    assert prints_answer(run_program(program), "9") is right


def test_a_program_that_runs_on_is_stopped_at_its_timeout():
    start = time.monotonic()
    run = run_program("print(1, flush=True)\nwhile True: pass", timeout_s=0.5)
    assert run.timed_out and run.returncode is None and run.stdout == "1\n"
    assert time.monotonic() - start < 5 and not prints_answer(run, "1")


def test_a_program_sees_a_fresh_folder_and_none_of_the_environment(monkeypatch):
    monkeypatch.setenv("STACKRL_TEST_SECRET", "hidden")
    run = run_program("import os\nprint(sorted(os.environ))\nprint(os.getcwd())")
    names, folder = run.stdout.strip().split("\n")
    assert "STACKRL_TEST_SECRET" not in names and "PATH" in names
    assert Path(folder).name.startswith("stackrl-program-") and not Path(folder).exists()  # removed after the run
    assert isinstance(run, ProgramRun) and not run.timed_out


# The SQL task's answers worked out in Python from the tables the prompt shows, not by sqlite3.

def _tables(prompt: str) -> dict[str, tuple[list[str], list[list]]]:
    """Each table the prompt shows: its columns and its rows, numbers read as ints."""
    tables, current = {}, None
    for line in prompt.split("\nQ: ")[0].split("\n"):
        if ": " in line:
            current, header = line.split(": ")
            tables[current] = (header.split(), [])
        else:
            tables[current][1].append([int(v) if v.isdigit() else v for v in line.split()])
    return tables


def _worked_out(prompt: str) -> str:
    tables = _tables(prompt)
    asked = prompt.split("\nQ: ")[1].removesuffix("\nSQL:\n")
    column = lambda table, name: [row[tables[table][0].index(name)] for row in tables[table][1]]  # noqa: E731
    if found := re.fullmatch(r"How many (\w+) have a (\w+) with (\w+) ([<>]) (\d+)\?", asked):
        table, group, attribute, op, bound = found.groups()
        joined = next(name for name in tables if name != table)
        passing = {g for g, a in zip(column(joined, group), column(joined, attribute)) if _COMPARE[op](a, int(bound))}
        return str(sum(g in passing for g in column(table, group)))
    if found := re.fullmatch(r"How many (\w+) have (\w+) ([<>]) (\d+)\?", asked):
        table, number, op, bound = found.groups()
        return str(sum(_COMPARE[op](v, int(bound)) for v in column(table, number)))
    if found := re.fullmatch(r"What is the (largest|smallest) (\w+) in (\w+)\?", asked):
        word, number, table = found.groups()
        return str((max if word == "largest" else min)(column(table, number)))
    if found := re.fullmatch(r"What is the total (\w+) of (\w+) with (\w+) (\w+)\?", asked):
        number, table, group, value = found.groups()
        return str(sum(v for g, v in zip(column(table, group), column(table, number)) if g == value))
    if found := re.fullmatch(r"Which (\w+) have (\w+) ([<>]) (\d+)\?", asked):
        table, number, op, bound = found.groups()
        names = column(table, "name")
        return "; ".join(sorted(n for n, v in zip(names, column(table, number)) if _COMPARE[op](v, int(bound))))
    if found := re.fullmatch(r"Which of (\w+) has the (largest|smallest) (\w+)\?", asked):
        table, word, number = found.groups()
        pairs = sorted(zip(column(table, number), column(table, "name")))
        return pairs[-1 if word == "largest" else 0][1]
    found = re.fullmatch(r"What is the total (\w+) per (\w+) in (\w+)\?", asked)
    number, group, table = found.groups()
    totals: dict[str, int] = {}
    for g, v in zip(column(table, group), column(table, number)):
        totals[g] = totals.get(g, 0) + v
    return "; ".join(f"{g}, {total}" for g, total in sorted(totals.items()))


def test_a_sql_problem_is_laid_out_as_the_task_says():
    problem = sql_task.make_problem(random.Random(3), "count")
    lines = problem["question"].split("\n")
    assert re.fullmatch(r"(pets|staff|crops): name \w+ \w+", lines[0]) and 4 <= len(lines) - 4 <= 6
    assert lines[-3].startswith("Q: How many ") and lines[-2:] == ["SQL:", ""]
    assert re.fullmatch(r"SELECT COUNT\(\*\) FROM \w+ WHERE \w+ [<>] \d+;", problem["solution"])
    table, (columns, rows) = next(iter(_tables(problem["question"]).items()))
    assert run_query(problem["setup"], f"SELECT * FROM {table}").rows == [tuple(row) for row in rows]
    assert columns == ["name", *(c.split()[0] for c in problem["setup"].split("(", 2)[1].split(", ")[1:])]


@pytest.mark.parametrize("split", ["train", "test"])
def test_every_answer_is_the_one_worked_out_from_the_tables_shown(split):
    rows = sql_task.make_dataset(split, 10 * len(sql_task.CATEGORIES), seed=1)
    assert rows.column_names == ["question", "answer", "solution", "category", "setup"]
    assert set(rows["category"]) == set(sql_task.CATEGORIES)
    for row in rows:
        assert row["answer"] == _worked_out(row["question"]), row["question"]
        assert sql_task.result_text(run_query(row["setup"], row["solution"]).rows) == row["answer"]
        assert row["answer"] != ""  # every question has an answer (a filter leaves a name)


def test_the_sql_task_splits_by_hash_and_repeats_per_seed():
    train, test = (set(sql_task.make_dataset(split, 140, seed=0)["question"]) for split in ("train", "test"))
    assert len(train) == len(test) == 140 and not train & test
    assert sql_task.make_dataset("test", 20, seed=2)[:] == sql_task.make_dataset("test", 20, seed=2)[:]
    assert sql_task.make_dataset("test", 20, seed=2)[:] != sql_task.make_dataset("test", 20, seed=3)[:]
    assert set(sql_task.make_dataset("train", 6, categories=["join"])["category"]) == {"join"}
    assert TASKS["sql"] is sql_task.make_dataset
    with pytest.raises(ValueError, match="unknown categories"):
        sql_task.make_dataset("train", 5, categories=["union"])
    with pytest.raises(ValueError, match="split"):
        sql_task.make_dataset("validation", 5)


def test_a_problem_and_its_query_fit_the_built_in_model():
    """Prompt, reference query and eos within the model's positions with room to spare (the longest at 250)."""
    import json

    from transformers import AutoTokenizer

    from stackrl.tasks import arith_roles_path

    tokenizer = AutoTokenizer.from_pretrained(arith_roles_path())
    positions = json.loads((arith_roles_path() / "config.json").read_text())["max_position_embeddings"]
    rows = sql_task.make_dataset("test", 20 * len(sql_task.CATEGORIES), seed=0)
    lengths = [len(tokenizer(q + s, add_special_tokens=False)["input_ids"]) + 1
               for q, s in zip(rows["question"], rows["solution"])]
    assert max(lengths) <= 300 < positions
    for row in rows.select(range(7)):  # the byte-level tokenizer gives back the text it was given
        assert tokenizer.decode(tokenizer(row["question"] + row["solution"])["input_ids"]) == row["question"] + row["solution"]


SETUP = "CREATE TABLE pets(name TEXT, kind TEXT, age INTEGER);\nINSERT INTO pets VALUES ('ann', 'cat', 3), ('bob', 'dog', 5);"


@pytest.mark.parametrize(("query", "parsed", "rows"), [
    ("SELECT name FROM pets WHERE age > 4;", True, [("bob",)]),
    ("SELECT nme FROM pets;", True, None),  # parses, names a column the table lacks
    ("SELECT name FROM pets WHERE", False, None),
    ("SELEC name FROM pets", False, None),
    ("SELECT 1; SELECT 2;", False, None),  # one statement only
    ("DELETE FROM pets;", True, None),  # read-only
    ("INSERT INTO pets VALUES ('cy', 'owl', 1);", True, None),
    ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n;", True, None),  # stopped
])
def test_a_query_runs_read_only_and_bounded(query, parsed, rows):
    start = time.monotonic()
    run = run_query(SETUP, query)
    assert (run.parsed, run.rows) == (parsed, rows), run.error
    assert (run.error is None) is (rows is not None) and time.monotonic() - start < 5


def test_a_result_is_the_same_in_any_row_order_and_never_after_a_failure():
    assert same_result([("bob",), ("ann",)], [("ann",), ("bob",)])
    assert not same_result([("ann",)], [("ann",), ("bob",)]) and not same_result([("ann", 3)], [("ann",)])
    assert not same_result(None, []) and same_result([], [])
    assert sql_task.result_text([("dog", 5), ("cat", 10)]) == "cat, 10; dog, 5"


def test_the_new_roles_are_taught_in_their_formats():
    """Each new role's examples, decoded: a program that prints the question's answer, a query whose result on
    the tables its prompt shows is the answer worked out from them, on training problems; the earlier roles still
    drawn."""
    from transformers import AutoTokenizer

    from stackrl.tasks import arith_roles_path
    from stackrl.tasks.arithmetic import split_of
    from stackrl.tasks.pretrain_code import _code_batches

    tokenizer = AutoTokenizer.from_pretrained(arith_roles_path())
    problems = make_dataset("train", 30, seed=0)
    answers = dict(zip(problems["question"], problems["answer"]))
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    for prompt, target in next(_code_batches(tokenizer, problems, random.Random(0), 8, {"code": 1.0})):
        prompt, target = decode(prompt), decode(target)
        question = prompt.removesuffix("Program:\n")
        assert prompt.endswith("?\nProgram:\n") and prints_answer(run_program(target), answers[question])
    for prompt, target in next(_code_batches(tokenizer, problems, random.Random(0), 16, {"sql": 1.0})):
        prompt, target = decode(prompt), decode(target)
        assert prompt.endswith("?\nSQL:\n") and split_of(prompt) == "train"
        setup = "\n".join(
            f"CREATE TABLE {table}({', '.join(columns)}); INSERT INTO {table} VALUES "
            + ", ".join("(" + ", ".join(repr(v) for v in row) + ")" for row in rows) + ";"
            for table, (columns, rows) in _tables(prompt).items()
        )
        assert sql_task.result_text(run_query(setup, target).rows) == _worked_out(prompt), prompt
    mixed = next(_code_batches(tokenizer, problems, random.Random(0), 64, {"judge": 1.0, "sql": 1.0}))
    texts = [decode(prompt) for prompt, _ in mixed]
    assert 10 < sum(t.endswith("Check:\n") for t in texts) < 54 and 10 < sum(t.endswith("SQL:\n") for t in texts) < 54


def test_a_run_trains_on_the_sql_task(make_config):
    """``data.source: sql`` names the task: its prompts are the whole problem, and its other columns are the
    dataset's, which every stage's rollout carries (the tables' ``setup`` is what an execution reward runs the
    policy's query on)."""
    from stackrl.data import first_row
    from stackrl.testing.fixtures import train_steps

    config = make_config(data={"source": "sql", "size": 8})
    assert config.host.data.source == "sql"
    assert set(first_row(config.host.data, "train")) == {"question", "answer", "solution", "category", "setup"}
    trainer = train_steps(config, steps=1)
    assert trainer.state.global_step == 1 and "setup" in trainer.train_dataset.column_names
    assert all(prompt.endswith("\nSQL:\n") for prompt in trainer.train_dataset["prompt"])



def test_the_figures_count_what_ran_and_what_was_right(monkeypatch):
    """evaluate_code on replies written by hand: a right program, one printing a wrong answer, one failing; a right
    query, one with another result, one naming a column the table lacks, one that does not parse."""
    from stackrl.tasks import pretrain_code

    arithmetic = make_dataset("test", 3, seed=0, categories=[CATEGORIES[0]])
    problems = sql_task.make_dataset("test", 4, seed=0, categories=["extreme"])
    programs = [write_program(arithmetic[0]["question"]), "print(-1)", "print(1 / 0)"]
    tables = [query.split(" FROM ")[1].rstrip(";") for query in problems["solution"]]
    queries = [problems[0]["solution"], f"SELECT name FROM {tables[1]} WHERE 0;", f"SELECT nme FROM {tables[2]};",
               "SELEC 1"]
    replies = lambda model, tokenizer, prompts, **kwargs: programs if prompts[0].endswith("Program:\n") else queries  # noqa: E731
    monkeypatch.setattr(pretrain_code, "generate", replies)
    figures = pretrain_code.evaluate_code(None, None, arithmetic, problems)
    for mode in ("greedy", "sampled"):
        assert figures["code"][mode]["runs"]["all"] == pytest.approx(2 / 3)
        assert figures["code"][mode]["right"]["all"] == pytest.approx(1 / 3)
        assert [figures["sql"][mode][k]["all"] for k in ("parses", "runs", "right")] == [0.75, 0.5, 0.25]
