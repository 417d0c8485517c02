"""The partial rewards on stackrl/arith-code's SQL task: hand-checked queries on the task's own problems score as
each term's formula says (the model's typical slip, ``<`` for ``>``, runs and names the right tables and columns
but misses the rows), and a short run (benchmarks/mechanism.py) raises the execution share and the partial reward
of the policy's samples over its steps."""

from pathlib import Path

import pytest

from stackrl.tasks.sql import make_dataset, run_query, same_result
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def _first(rows, category, keep=lambda row: True):
    found = [row for row in rows if row["category"] == category and keep(row)]
    assert found, f"no {category} problem fits"
    return found[0]


def _swap(query):
    return query.replace("<", "#").replace(">", "<").replace("#", ">")


class Rollout:
    def __init__(self, rows, completions):
        self.completions = completions
        self.columns = {"setup": [r["setup"] for r in rows], "solution": [r["solution"] for r in rows]}

    def __len__(self):
        return len(self.completions)


class Context:
    def __init__(self, rows, completions):
        self.rollout, self.logged = Rollout(rows, completions), {}

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def test_hand_checked_queries_on_the_sql_task_score_as_each_term_says():
    rows = make_dataset("train", 70, seed=0)
    slipped = _first(rows, "count", lambda r: not same_result(run_query(r["setup"], _swap(r["solution"])).rows,
                                                              run_query(r["setup"], r["solution"]).rows))
    grouped = _first(rows, "group", lambda r: len(run_query(r["setup"], r["solution"]).rows) > 1)
    table = slipped["solution"].split(" FROM ")[1].split()[0]
    joined = {"pets": "kinds", "staff": "depts", "crops": "farms"}[table]
    reordered = grouped["solution"].replace(";", "") + f" ORDER BY {grouped['solution'].split()[1].rstrip(',')} DESC;"
    assert run_query(grouped["setup"], reordered).rows != run_query(grouped["setup"], grouped["solution"]).rows
    cases = [
        (slipped, slipped["solution"], 3 + 1 + 1 + 1 + 1),
        # the slip: runs, links the schema, 9 of 13 bigrams, fails execution
        (slipped, _swap(slipped["solution"]), 0 + 1 + 1 + 9 / 13 + 1),
        # the right rows in another order: full execution; 11 of 16 bigrams
        (grouped, reordered, 3 + 1 + 1 + 11 / 16 + 1),
        # a table the problem lacks: fails to run; {that table, the column} against {the table, the column}
        (slipped, slipped["solution"].replace(f"FROM {table} ", f"FROM {joined} "), 0 + 0 + 1 / 3 + 9 / 13 + 1),
        (slipped, "SELEC COUNT FROM", 0.0),
    ]
    ctx = Context([row for row, _, _ in cases], [query for _, query, _ in cases])
    rewards = make_plugin("sqlpartial").reward(ctx)
    assert rewards == pytest.approx([expected for _, _, expected in cases])
    assert ctx.acted_on == (5, 5)
    # The weights are the configured ones: execution alone gives 3 to the two right queries and nothing else.
    alone = make_plugin("sqlpartial", syntax_weight=0.0, schema_weight=0.0, ngram_weight=0.0, format_weight=0.0)
    assert alone.reward(Context([row for row, _, _ in cases], [q for _, q, _ in cases])) == [3.0, 0.0, 3.0, 0.0, 0.0]


def test_a_short_run_raises_the_execution_share_and_the_partial_reward():
    # A pool of 8 problems, the same each step, so that the shares of successive steps are comparable.
    figures = load_script(BENCHMARK).run(seed=2, steps=6, overrides=["data.size=8"])
    assert figures["execution_last"] > figures["execution_first"], figures["execution"]
    assert figures["partial_last"] > figures["partial_first"], figures["partial_reward"]
