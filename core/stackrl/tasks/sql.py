"""A generated text-to-SQL task over a small synthetic table, its answers computed by sqlite3.

A problem shows one table (two for a join), a header line then a handful of rows, asks a question from one of a
few templates, and expects the SQL query that answers it::

    question: "pets: name kind age\\nann cat 3\\nbob dog 5\\ncy cat 7\\nQ: How many pets have age > 4?\\nSQL:\\n"
    solution: "SELECT COUNT(*) FROM pets WHERE age > 4;"
    answer:   "2"
    setup:    "CREATE TABLE pets(name TEXT, kind TEXT, age INTEGER);\\nINSERT INTO pets VALUES ('ann', 'cat', 3), ..."

The ``question`` is the whole prompt (the tables, the question, the marker ``SQL:``), so a run on ``data.source:
sql`` shows it as it is; ``setup`` is the script that builds the tables shown, for a reward that runs the policy's
query (:func:`run_query`); ``answer`` is the reference query's result as :func:`result_text` writes it.

Categories (``category``), each one template: "count" (rows past a threshold), "extreme" (the largest or smallest
value), "sum" (the total of one group), "filter" (the names past a threshold), "order" (the name with the largest
or smallest value), "group" (the total of each group) and "join" (rows whose group has a property listed in a
second table). Three schemas (:data:`SCHEMAS`) and 4 to 6 rows; a table's numbers are distinct, so no question has
a tie. A prompt and its query take at most about 250 tokens of the built-in tokenizer (its context holds 512).

Train/test split by a hash of the question text, as the arithmetic task's (:func:`stackrl.tasks.arithmetic.split_of`):
any train set is disjoint from any test set.

Queries run on stdlib sqlite3 in memory, the tables built from ``setup``, then read-only (``PRAGMA query_only``),
a query stopped after a bounded amount of work. That measures the built-in model; a training run's rewards execute
the policy's queries through the sandbox block's ``SqlDatabase`` (issue 43).
"""

from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass

from stackrl.tasks.arithmetic import SPLITS, split_of

__all__ = ["CATEGORIES", "SCHEMAS", "SQL_MARKER", "QueryRun", "Schema", "make_dataset", "make_problem",
           "result_text", "run_query", "same_result"]

SQL_MARKER = "SQL:"
_QUESTION_PREFIX = "Q: "


@dataclass(frozen=True)
class Schema:
    """A table ``name(name, group, number)`` and the table ``joined(group, attribute)`` a join question reads:
    the group column's values and the number column's range."""

    table: str
    group: str
    groups: tuple[str, ...]
    number: str
    low: int
    high: int
    joined: str
    attribute: str


SCHEMAS = (
    Schema("pets", "kind", ("cat", "dog", "owl"), "age", 1, 15, "kinds", "legs"),
    Schema("staff", "dept", ("ops", "art", "law"), "pay", 10, 99, "depts", "floor"),
    Schema("crops", "farm", ("elm", "oak", "ash"), "kg", 1, 50, "farms", "acres"),
)
NAMES = ("ann", "bob", "cy", "dan", "eve", "fay", "gus", "hal", "ivy", "jo")
CATEGORIES = ["count", "extreme", "sum", "filter", "order", "group", "join"]


def _ask(category: str, schema: Schema, rows: list[tuple], rng: random.Random):
    """(question, query) of ``category`` about ``rows``: the templates the module docstring lists."""
    t, g, n = schema.table, schema.group, schema.number
    values = sorted(row[2] for row in rows)
    if category == "count":
        op, bound = rng.choice("<>"), rng.randint(schema.low, schema.high)
        return f"How many {t} have {n} {op} {bound}?", f"SELECT COUNT(*) FROM {t} WHERE {n} {op} {bound};"
    if category in ("extreme", "order"):
        largest = rng.random() < 0.5
        word = "largest" if largest else "smallest"
        if category == "extreme":
            return f"What is the {word} {n} in {t}?", f"SELECT {'MAX' if largest else 'MIN'}({n}) FROM {t};"
        order = "DESC" if largest else "ASC"
        return f"Which of {t} has the {word} {n}?", f"SELECT name FROM {t} ORDER BY {n} {order} LIMIT 1;"
    if category == "sum":
        group = rng.choice(rows)[1]
        return f"What is the total {n} of {t} with {g} {group}?", f"SELECT SUM({n}) FROM {t} WHERE {g} = '{group}';"
    if category == "filter":  # a bound that leaves at least one name
        op = rng.choice("<>")
        bound = rng.choice(values[:-1] if op == ">" else values[1:])
        return f"Which {t} have {n} {op} {bound}?", f"SELECT name FROM {t} WHERE {n} {op} {bound};"
    if category == "group":
        return f"What is the total {n} per {g} in {t}?", f"SELECT {g}, SUM({n}) FROM {t} GROUP BY {g};"
    j, a = schema.joined, schema.attribute
    op, bound = rng.choice("<>"), rng.randint(2, 8)
    return (f"How many {t} have a {g} with {a} {op} {bound}?",
            f"SELECT COUNT(*) FROM {t} JOIN {j} ON {t}.{g} = {j}.{g} WHERE {a} {op} {bound};")


def _sql_value(value) -> str:
    return f"'{value}'" if isinstance(value, str) else str(value)


def _setup(schema: Schema, rows: list[tuple], attributes: dict[str, int] | None) -> str:
    script = [f"CREATE TABLE {schema.table}(name TEXT, {schema.group} TEXT, {schema.number} INTEGER);",
              f"INSERT INTO {schema.table} VALUES " + ", ".join(f"({', '.join(map(_sql_value, row))})" for row in rows)
              + ";"]
    if attributes:
        script += [f"CREATE TABLE {schema.joined}({schema.group} TEXT, {schema.attribute} INTEGER);",
                   f"INSERT INTO {schema.joined} VALUES "
                   + ", ".join(f"('{group}', {value})" for group, value in attributes.items()) + ";"]
    return "\n".join(script)


def _render(schema: Schema, rows: list[tuple], attributes: dict[str, int] | None) -> str:
    lines = [f"{schema.table}: name {schema.group} {schema.number}", *(" ".join(map(str, row)) for row in rows)]
    if attributes:
        lines += [f"{schema.joined}: {schema.group} {schema.attribute}",
                  *(f"{group} {value}" for group, value in attributes.items())]
    return "\n".join(lines) + "\n"


def make_problem(rng: random.Random, category: str) -> dict[str, str]:
    """One problem of ``category`` drawn with ``rng``: a dict with question, answer, solution, category, setup."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; known: {CATEGORIES}")
    schema = rng.choice(SCHEMAS)
    size = rng.randint(4, 6)
    numbers = rng.sample(range(schema.low, schema.high + 1), size)
    rows = [(name, rng.choice(schema.groups), number) for name, number in zip(rng.sample(NAMES, size), numbers)]
    attributes = dict(zip(schema.groups, rng.sample(range(1, 10), len(schema.groups)))) if category == "join" else None
    asked, query = _ask(category, schema, rows, rng)
    setup = _setup(schema, rows, attributes)
    return {
        "question": f"{_render(schema, rows, attributes)}{_QUESTION_PREFIX}{asked}\n{SQL_MARKER}\n",
        "answer": result_text(run_query(setup, query).rows),
        "solution": query,
        "category": category,
        "setup": setup,
    }


def make_dataset(
    split: str = "train",
    size: int = 256,
    seed: int = 0,
    categories: list[str] | None = None,
    distinct: bool = True,
):
    """``size`` problems of ``split``, cycling through ``categories`` (default: all, in :data:`CATEGORIES` order).

    Same arguments -> same rows. Returns a :class:`datasets.Dataset` with columns question, answer, solution,
    category, setup.
    """
    from datasets import Dataset

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    categories = list(categories) if categories else list(CATEGORIES)
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown categories {unknown}; known: {CATEGORIES}")
    rng = random.Random(f"stackrl.sql/{split}/{seed}")
    rows, seen = [], set()
    while len(rows) < size:
        problem = make_problem(rng, categories[len(rows) % len(categories)])
        if (distinct and problem["question"] in seen) or split_of(problem["question"]) != split:
            continue
        seen.add(problem["question"])
        rows.append(problem)
    if not rows:
        return Dataset.from_dict({column: [] for column in ("question", "answer", "solution", "category", "setup")})
    return Dataset.from_list(rows)


@dataclass(frozen=True)
class QueryRun:
    """What running a query gave: its rows (``None`` when it failed), the error's message, and whether sqlite3
    could parse it (a query that parses may still fail, naming a column the table lacks)."""

    rows: list[tuple] | None
    error: str | None
    parsed: bool


_SYNTAX = re.compile(r"syntax error|incomplete input|unrecognized token|one statement at a time")
_WORK_LIMIT = 200  # progress-handler calls (of 1000 virtual-machine steps each) before a query is stopped


def run_query(setup: str, query: str) -> QueryRun:
    """Run ``query`` on a fresh in-memory database built by ``setup``, read-only, stopped after a bounded amount of
    work (:data:`_WORK_LIMIT`). One statement only."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript(setup)
        connection.execute("PRAGMA query_only = ON")
        calls = iter(range(_WORK_LIMIT))
        connection.set_progress_handler(lambda: next(calls, None) is None, 1000)
        try:
            return QueryRun(connection.execute(query).fetchall(), None, True)
        except (sqlite3.Error, sqlite3.Warning, ValueError) as failed:
            return QueryRun(None, str(failed), _SYNTAX.search(str(failed)) is None)
    finally:
        connection.close()


def same_result(rows: list[tuple] | None, reference: list[tuple]) -> bool:
    """Whether a query's ``rows`` are the ``reference`` query's, in any order (a failed query's ``None`` never)."""
    order = lambda found: sorted(map(tuple, found), key=repr)  # noqa: E731
    return rows is not None and order(rows) == order(reference)


def result_text(rows: list[tuple]) -> str:
    """Rows as one line: in sorted order, values joined by ", ", rows by "; " (``"cat, 10; dog, 5"``)."""
    return "; ".join(", ".join(map(str, row)) for row in sorted(map(tuple, rows), key=repr))
