"""SqlDatabase: read-only SQL under a time limit, and the SQL analysis of the sandbox block."""

import sqlite3

import pytest

from stackrl.blocks.sandbox import SqlDatabase, SqlResult, analyze, same_rows

SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, total REAL);
INSERT INTO users VALUES (1, 'ada', 'london'), (2, 'alan', 'wilmslow'), (3, 'grace', 'arlington');
INSERT INTO orders VALUES (1, 1, 9.5), (2, 1, 20.0), (3, 3, 4.25);
"""


@pytest.fixture
def database(tmp_path):
    db = SqlDatabase.build(tmp_path / "shop.db", SCHEMA, timeout_s=0.5, max_rows=2)
    yield db
    db.close()


def test_a_query_reads_rows_and_columns(database):
    result = database.execute("SELECT name, SUM(total) FROM users JOIN orders ON users.id = user_id GROUP BY name ORDER BY name")
    assert (result.rows, result.columns, result.stopped) == ([("ada", 29.5), ("grace", 4.25)], ["name", "SUM(total)"], "done")
    everyone = database.execute("SELECT id FROM users ORDER BY id")
    assert everyone.rows == [(1,), (2,)] and everyone.truncated  # cut at max_rows


@pytest.mark.parametrize("statement, action", [
    ("INSERT INTO users VALUES (4, 'eve', 'x')", "INSERT"),
    ("UPDATE users SET name = 'eve'", "UPDATE"),
    ("DELETE FROM orders", "DELETE"),
    ("DROP TABLE orders", "DELETE"),
    ("ALTER TABLE users ADD COLUMN age INTEGER", "ALTER_TABLE"),
    ("ATTACH DATABASE ':memory:' AS other", "ATTACH"),
    ("PRAGMA query_only = 0", "PRAGMA"),
    ("BEGIN", "TRANSACTION"),
])
def test_an_sql_write_is_refused(database, tmp_path, statement, action):
    result = database.execute(statement)
    assert result.stopped == "refused" and result.error.startswith(f"{action} is not allowed")
    check = sqlite3.connect(tmp_path / "shop.db")
    assert check.execute("SELECT COUNT(*) FROM users").fetchone() == (3,)
    assert check.execute("SELECT COUNT(*) FROM orders").fetchone() == (3,)
    assert [row[0] for row in check.execute("PRAGMA table_info(users)")] == [0, 1, 2]
    check.close()


def test_a_runaway_query_stops_at_its_time_limit(database):
    forever = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n"
    result = database.execute(forever)
    assert result.stopped == "timeout" and result.rows == []
    assert database.execute("SELECT COUNT(*) FROM users").rows == [(3,)]  # the connection is still usable


def test_what_the_query_gets_wrong_is_a_result_not_an_exception(database):
    assert database.execute("SELECT * FROM nowhere").error == "no such table: nowhere"
    assert database.execute("SELECT 1; SELECT 2").stopped == "error"
    assert database.execute("SELEC 1").stopped == "error"


def test_results_match_by_their_rows():
    a = SqlResult([(1, "x"), (2, "y")], ["a", "b"], "done", None)
    b = SqlResult([(2, "y"), (1, "x")], ["c", "d"], "done", None)
    assert same_rows(a, b) and not same_rows(a, b, ordered=True)
    assert not same_rows(a, SqlResult([(1, "x")], ["a"], "done", None))
    assert not same_rows(a, SqlResult([(1, "x"), (1, "x")], ["a", "b"], "done", None))  # a multiset, not a set
    failed = SqlResult([], [], "error", "no such table")
    assert not same_rows(failed, failed)


def test_analyze_reads_the_parts_of_a_query():
    parts = analyze("SELECT u.name, COUNT(*) FROM users u JOIN orders o ON u.id = o.user_id WHERE o.total > 5 GROUP BY u.name")
    assert parts.parses and parts.read_only
    assert parts.tables == {"users", "orders"} and parts.columns == {"name", "id", "user_id", "total"}
    assert parts.clauses == {"select", "join", "where", "group"}
    assert not analyze("DELETE FROM users").read_only
    assert analyze("WITH a AS (SELECT 1 AS x) SELECT x FROM a").read_only
    broken = analyze("SELECT FROM WHERE (")
    assert not broken.parses and broken.error
