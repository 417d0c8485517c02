"""Reasoning-SQL's partial rewards: each term on hand-written queries whose values are known by hand, the weighted
sum through the reward hook, the databases kept per problem, and the conformance suite on the SQL task."""

from types import SimpleNamespace

import pytest

from stackrl.blocks.sandbox import SqlDatabase, analyze
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_sqlpartial import terms
from stackrl_sqlpartial.databases import Databases

SETUP = ("CREATE TABLE pets(name TEXT, kind TEXT, age INTEGER);\n"
         "INSERT INTO pets VALUES ('ann', 'cat', 3), ('bob', 'dog', 5), ('cy', 'cat', 7);\n"
         "CREATE TABLE kinds(kind TEXT, legs INTEGER);\nINSERT INTO kinds VALUES ('cat', 4), ('dog', 4);")
COUNT = "SELECT COUNT(*) FROM pets WHERE age > 4;"
SWAPPED = "SELECT COUNT(*) FROM pets WHERE age < 4;"


class TestConformance(PluginConformance):
    plugin_name = "sqlpartial"
    plugin_settings = {"data": {"source": "sql", "size": 8}, "rewards": {"exact_match": None}}
    refused_settings = [({"execution_weight": -1.0}, "must be non-negative, not -1.0"),
                        ({"execution_weight": 0.0, "syntax_weight": 0.0, "schema_weight": 0.0, "ngram_weight": 0.0,
                          "format_weight": 0.0}, "every term's weight is 0"),
                        ({"schema_mode": "f1"}, "must be one of jaccard, recall, not 'f1'"),
                        ({"ngram": 0}, "must be at least 1, not 0"),
                        ({"timeout_s": 0.0}, "must be positive, not 0.0")]


def test_the_query_is_the_completion_up_to_its_first_semicolon_and_the_format_one_statement():
    assert terms.query_of("  SELECT 1; junk after") == "SELECT 1;"
    assert terms.query_of("SELECT 1\n") == "SELECT 1"
    assert terms.query_of("Think.\n```sql\nSELECT 1\n```\nthen\n```sql\nSELECT 2;\n```") == "SELECT 2;"
    assert terms.well_formed("SELECT 1;\n") == 1.0
    assert terms.well_formed("SELECT 1; SELECT 2;") == 0.0 and terms.well_formed("SELECT 1") == 0.0
    assert terms.well_formed("   ") == 0.0


def test_ngram_similarity_is_the_jaccard_of_word_bigrams():
    # 12 tokens, 11 distinct bigrams each; the swap changes (age, >) and (>, 4): 9 shared of 13.
    assert terms.ngram_similarity(COUNT, SWAPPED) == pytest.approx(9 / 13)
    assert terms.ngram_similarity(COUNT, COUNT.lower()) == 1.0
    assert terms.ngram_similarity("a b c", "a b d", n=1) == pytest.approx(2 / 4)
    assert terms.ngram_similarity("", "") == 0.0


def test_schema_linking_counts_tables_and_columns_apart_jaccard_or_recall():
    gold = analyze(COUNT)  # {table pets, column age}
    wrong_table = analyze("SELECT COUNT(*) FROM kinds WHERE age > 4;")  # {table kinds, column age}
    extra_table = analyze("SELECT COUNT(*) FROM pets JOIN kinds ON pets.kind = kinds.kind WHERE age > 4;")
    assert terms.schema_linking(gold, gold) == 1.0
    assert terms.schema_linking(wrong_table, gold) == pytest.approx(1 / 3)
    assert terms.schema_linking(wrong_table, gold, "recall") == pytest.approx(1 / 2)
    # pets, kinds, age, kind against pets, age: Jaccard 2/4; recall counts the extra table nothing.
    assert terms.schema_linking(extra_table, gold) == pytest.approx(2 / 4)
    assert terms.schema_linking(extra_table, gold, "recall") == 1.0
    assert terms.schema_linking(analyze("SELEC 1 FROM"), gold) == 0.0
    # a column named like a table is not that table
    assert terms.schema_items(analyze("SELECT kinds FROM pets;")) == {("table", "pets"), ("column", "kinds")}


def test_execution_compares_rows_in_any_order_and_syntax_asks_only_that_it_ran(tmp_path):
    database = SqlDatabase.build(tmp_path / "pets.sqlite", SETUP)
    reference = database.execute("SELECT name FROM pets WHERE age > 2;")
    reversed_rows = database.execute("SELECT name FROM pets WHERE age > 2 ORDER BY name DESC;")
    assert reversed_rows.rows != reference.rows
    assert terms.execution(reversed_rows, reference) == 1.0
    assert terms.execution(reversed_rows, reference, ordered=True) == 0.0
    wrong = database.execute(SWAPPED)
    assert terms.execution(wrong, database.execute(COUNT)) == 0.0 and terms.syntax(wrong) == 1.0
    missing = database.execute("SELECT COUNT(*) FROM owls;")
    assert terms.syntax(missing) == 0.0 and terms.execution(missing, missing) == 0.0
    database.close()


class RewardStub:
    """The reward stage's context: a rollout of the written completions with their rows' tables and queries."""

    def __init__(self, completions, setups, solutions):
        self.rollout = _Rollout(completions, {"setup": setups, "solution": solutions})
        self.logged, self.acted_on = {}, None

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


class _Rollout:
    def __init__(self, completions, columns):
        self.completions, self.columns = completions, columns

    def __len__(self):
        return len(self.completions)


def test_the_reward_is_the_weighted_sum_of_the_terms_and_rows_without_tables_are_not_scored():
    completions = [COUNT, SWAPPED + " tail", "SELECT COUNT(*) FROM kinds WHERE age > 4;", COUNT]
    ctx = RewardStub(completions, [SETUP, SETUP, SETUP, None], [COUNT, COUNT, COUNT, None])
    rewards = make_plugin("sqlpartial").reward(ctx)
    swapped = 0 + 1 + 1 + 9 / 13 + 0  # ran, same tables and columns, 9 of 13 bigrams, text after the ";"
    # kinds has no age: it fails to run; {kinds, age} against {pets, age}; bigrams differ in the table's name
    wrong_table = 0 + 0 + 1 / 3 + 9 / 13 + 1
    assert rewards[:3] == pytest.approx([3 + 4, swapped, wrong_table]) and rewards[3] is None
    assert ctx.acted_on == (3, 4)
    assert ctx.logged["execution"] == pytest.approx(1 / 3) and ctx.logged["syntax"] == pytest.approx(2 / 3)
    weighted = make_plugin("sqlpartial", execution_weight=10.0, syntax_weight=0.0, schema_weight=2.0,
                           ngram_weight=0.5, format_weight=0.0).reward(RewardStub(completions[:3], [SETUP] * 3,
                                                                                   [COUNT] * 3))
    assert weighted == pytest.approx([10 + 2 + 0.5, 2 + 0.5 * 9 / 13, 2 / 3 + 0.5 * 9 / 13])
    recall = make_plugin("sqlpartial", schema_mode="recall").reward(RewardStub(completions[2:3], [SETUP], [COUNT]))
    assert recall == pytest.approx([1 / 2 + 9 / 13 + 1])


def test_a_reference_that_fails_on_its_tables_leaves_the_row_unscored():
    ctx = RewardStub([COUNT], [SETUP], ["SELECT * FROM owls;"])
    assert make_plugin("sqlpartial").reward(ctx) == [None] and ctx.acted_on == (0, 1)


def test_databases_are_built_once_per_setup_and_the_oldest_closed_past_keep():
    databases = Databases(timeout_s=1.0, keep=1)
    first = databases.of(SETUP)
    assert databases.of(SETUP) is first and databases.reference(SETUP, COUNT).rows == [(2,)]
    other = "CREATE TABLE t(x INTEGER);\nINSERT INTO t VALUES (1);"
    assert databases.run(other, "SELECT x FROM t;").rows == [(1,)]
    assert list(databases.open) != [] and len(databases.open) == 1 and not databases.references
    folder = databases.folder
    databases.close()
    assert not folder.exists()


def test_a_run_without_the_columns_gets_a_note_not_a_refusal():
    plugin = make_plugin("sqlpartial")
    assert plugin.check_run(SimpleNamespace(columns=["question", "setup", "solution"])) is None
    assert plugin.check_run(SimpleNamespace(columns=None)) is None
    notes = plugin.check_run(SimpleNamespace(columns=["question", "answer"]))
    assert notes and "'setup', 'solution'" in notes[0]
