"""``SqlDatabase``: model-written SQL answered by an SQLite database opened read-only, under a time limit.

Three locks keep a query from changing anything or running on: the file is opened read-only (``mode=ro``), an
authorizer allows only reading (``SELECT``, reading columns, functions and recursive CTEs; writes, schema changes,
``ATTACH``, ``PRAGMA`` and transactions are refused before the statement runs), and a progress handler interrupts
a statement past its time. The database runs in the trainer's process (stdlib ``sqlite3``), so no process is
started per query. :func:`analyze` reads a query's structure with ``sqlglot`` (the ``sandbox`` extra).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

# What the authorizer lets a query do: read, nothing else.
_READING = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_ACTIONS = {getattr(sqlite3, f"SQLITE_{name}"): name for name in (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW",
    "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX", "DROP_TEMP_TABLE",
    "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA", "TRANSACTION", "UPDATE",
    "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE", "DROP_VTABLE", "SAVEPOINT",
)}


@dataclass(frozen=True)
class SqlResult:
    """A query's rows (tuples, at most ``max_rows``; ``truncated`` when there were more) and column names, or why
    there are none: ``stopped`` is ``done``, ``refused`` (it would write or change the schema: ``error`` says
    which action), ``timeout``, or ``error`` (the database's message in ``error``)."""

    rows: list[tuple]
    columns: list[str]
    stopped: str
    error: str | None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.stopped == "done"


class SqlDatabase:
    """Read-only queries on the SQLite file ``path``, each stopped after ``timeout_s`` seconds and cut at
    ``max_rows`` rows. One connection, used by one thread at a time."""

    def __init__(self, path: str | Path, timeout_s: float = 5.0, max_rows: int = 10_000):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"SqlDatabase: no database file {path}")
        self.path, self.timeout_s, self.max_rows = path, timeout_s, max_rows
        self._connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        self._connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 10_000_000)  # no gigabyte strings or blobs
        self._connection.set_authorizer(self._authorize)
        self._deadline = 0.0
        self._refused: str | None = None
        self._connection.set_progress_handler(self._past_deadline, 1000)

    @classmethod
    def build(cls, path: str | Path, script: str, **options) -> SqlDatabase:
        """Write a new database file at ``path`` from an SQL ``script`` (schema and rows), then open it read-only."""
        path = Path(path)
        if path.exists():
            raise FileExistsError(f"SqlDatabase.build: {path} exists; build writes a new database")
        with sqlite3.connect(path) as writer:
            writer.executescript(script)
        writer.close()
        return cls(path, **options)

    def execute(self, sql: str, timeout_s: float | None = None) -> SqlResult:
        """Run one statement; never raises for what the query does wrong (that is the result's ``error``)."""
        self._deadline = time.monotonic() + (timeout_s or self.timeout_s)
        self._refused = None
        try:
            cursor = self._connection.execute(sql)
            rows = cursor.fetchmany(self.max_rows + 1)
            columns = [column[0] for column in cursor.description or ()]
        except sqlite3.Error as exc:
            if self._refused:
                return SqlResult([], [], "refused", f"{self._refused} is not allowed: the database is read-only")
            if isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted":
                return SqlResult([], [], "timeout", f"stopped after {timeout_s or self.timeout_s} s")
            return SqlResult([], [], "error", str(exc))
        except (ValueError, OverflowError) as exc:  # several statements, a NUL character, a too-large integer
            return SqlResult([], [], "error", str(exc))
        finally:
            if self._connection.in_transaction:
                self._connection.rollback()
        return SqlResult(rows[: self.max_rows], columns, "done", None, truncated=len(rows) > self.max_rows)

    def close(self) -> None:
        self._connection.close()

    def _authorize(self, action, *_details) -> int:
        if action in _READING:
            return sqlite3.SQLITE_OK
        self._refused = self._refused or _ACTIONS.get(action, str(action))
        return sqlite3.SQLITE_DENY

    def _past_deadline(self) -> int:
        return int(time.monotonic() > self._deadline)


def same_rows(a: SqlResult, b: SqlResult, ordered: bool = False) -> bool:
    """Whether two results hold the same rows (as a multiset unless ``ordered``): execution-match accuracy and
    the grouping of candidate queries by what they return. Failed results match nothing."""
    if not (a.ok and b.ok):
        return False
    if ordered:
        return a.rows == b.rows
    return sorted(map(repr, a.rows)) == sorted(map(repr, b.rows))


@dataclass(frozen=True)
class SqlAnalysis:
    """What a query is made of: whether it parses, whether it only reads, the tables and columns it names, and
    its parts (``select``, ``where``, ``group``, ``order``, ``having``, ``limit``, ``join``) for partial rewards."""

    parses: bool
    read_only: bool
    tables: frozenset[str]
    columns: frozenset[str]
    clauses: frozenset[str]
    error: str | None = None


def analyze(sql: str, dialect: str = "sqlite") -> SqlAnalysis:
    """The structure of ``sql`` by ``sqlglot`` (``pip install 'stackrl[sandbox]'``); a query that does not parse
    gives ``parses=False`` and the parser's message."""
    try:
        import sqlglot
        from sqlglot import exp
    except ImportError as exc:
        raise ImportError("analyze needs sqlglot: pip install 'stackrl[sandbox]'") from exc
    try:
        trees = [tree for tree in sqlglot.parse(sql, read=dialect) if tree is not None]
    except sqlglot.errors.SqlglotError as exc:
        return SqlAnalysis(False, False, frozenset(), frozenset(), frozenset(), str(exc).splitlines()[0])
    if not trees:
        return SqlAnalysis(False, False, frozenset(), frozenset(), frozenset(), "no statement")
    reading = (exp.Select, exp.Union, exp.Intersect, exp.Except)
    clause_of = {"where": exp.Where, "group": exp.Group, "order": exp.Order, "having": exp.Having,
                 "limit": exp.Limit, "join": exp.Join, "select": exp.Select}
    tables, columns, clauses = set(), set(), set()
    for tree in trees:
        tables |= {table.name.lower() for table in tree.find_all(exp.Table)}
        columns |= {column.name.lower() for column in tree.find_all(exp.Column)}
        clauses |= {name for name, kind in clause_of.items() if tree.find(kind) is not None}
    read_only = all(isinstance(tree, reading) or (isinstance(tree, exp.With) and isinstance(tree.this, reading))
                    for tree in trees)
    return SqlAnalysis(True, read_only, frozenset(tables), frozenset(columns), frozenset(clauses))
