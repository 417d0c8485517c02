"""Tests of the `cscsql` plugin: execution grouping and the vote by hand, the reviser's prompt, the reward on
hand-written queries of the built-in SQL task, the reviser's plumbing with a scripted policy, and conformance."""

from __future__ import annotations

import random

import pytest

from stackrl import RewardContext, Rollout, StepContext
from stackrl.blocks.sandbox import SqlResult
from stackrl.tasks.sql import make_problem
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.scripted import ScriptedPolicy
from stackrl_cscsql import candidates, execution_groups, reviser_prompt, voted
from stackrl_cscsql.revision import is_reviser_prompt


def ok(*rows):
    return SqlResult(list(rows), ["c"], "done", None)


FAILED = SqlResult([], [], "error", "no such column: x")


class TestConformance(PluginConformance):
    plugin_name = "cscsql"
    plugin_settings = {"data": {"source": "sql", "size": 8}}
    refused_settings = [
        ({"candidates": 1}, "at least 2"),
        ({"max_result_rows": 0}, "at least 1"),
        ({"timeout_s": 0}, "positive"),
        ({"revise_temperature": -1.0}, "at least 0"),
    ]


# -- the vote ---------------------------------------------------------------------------------------------------


def test_queries_are_grouped_by_their_rows_in_any_order_largest_group_first():
    results = [ok((1,), (2,)), ok((3,)), ok((2,), (1,)), FAILED, ok((3,)), ok((1,), (2,))]
    groups = execution_groups(results)
    assert [g.members for g in groups] == [(0, 2, 5), (1, 4)]
    assert voted(groups) == 0 and candidates(groups, 2) == [0, 1]


def test_failed_queries_cast_no_vote():
    """Three failures (each a different error) against two queries agreeing: the agreeing pair wins; the failed
    ones are in no group, even as a group of their own."""
    errors = [SqlResult([], [], "error", f"error {k}") for k in range(3)]
    results = [errors[0], ok((7,)), errors[1], ok((7,)), errors[2]]
    assert [g.members for g in execution_groups(results)] == [(1, 3)]
    assert voted(execution_groups(results)) == 1
    none_ran = execution_groups([FAILED, FAILED])
    assert none_ran == [] and candidates(none_ran) == [] and voted(none_ran) == 0


def test_a_multiset_of_rows_is_one_result_and_ties_keep_sampling_order():
    # (1,),(1,) and (1,) differ as results (same_rows compares multisets); two groups of one: the first sampled wins.
    results = [ok((1,)), ok((1,), (1,)), ok((2,)), ok((2,))]
    assert [g.members for g in execution_groups(results)] == [(2, 3), (0,), (1,)]
    assert candidates(execution_groups(results), 3) == [2, 0, 1]


def test_the_majority_is_voted_when_it_is_a_minority_of_the_texts():
    """Three differently written queries with one result beat two identical texts with another."""
    results = [ok((5,)), ok((9,)), ok((5,)), ok((9,)), ok((5,))]
    groups = execution_groups(results)
    assert voted(groups) == 0 and candidates(groups) == [0, 1]


# -- the reviser's prompt ---------------------------------------------------------------------------------------


def test_reviser_prompt_puts_numbered_drafts_and_their_rows_before_the_marker():
    question = "t: a\n3\n1\nQ: Which a are in t?\nSQL:\n"
    prompt = reviser_prompt(question, ["SELECT a FROM t;\n", "SELECT 1;"], [ok((3,), (1,)), ok((1,), (2,), (3,))], 2)
    assert prompt == ("t: a\n3\n1\nQ: Which a are in t?\nDrafts:\n1. SELECT a FROM t;\nResult: 1; 3\n"
                      "2. SELECT 1;\nResult: 1; 2 ...\nSQL:\n")
    assert is_reviser_prompt(prompt) and not is_reviser_prompt(question)
    with pytest.raises(ValueError, match="marker"):
        reviser_prompt("no marker", ["SELECT 1"], [ok((1,))])


# -- the reward and the reviser on the built-in SQL task ---------------------------------------------------------

PROBLEM = make_problem(random.Random(0), "group")  # total pay per dept: art 75, law 15, ops 176
RIGHT = "SELECT dept, SUM(pay) FROM staff GROUP BY dept;"
RIGHT_TOO = "select dept, sum(pay) from staff group by dept order by dept"
WRONG = "SELECT dept, MAX(pay) FROM staff GROUP BY dept;"
BROKEN = "SELECT dept, SUM(wage) FROM staff GROUP BY dept;"


def rollout(completions, prompt=PROBLEM["question"], columns=None):
    n = len(completions)
    columns = columns if columns is not None else {k: [PROBLEM[k]] * n for k in ("answer", "solution", "category", "setup")}
    return Rollout(prompts=[prompt] * n, completions=list(completions), prompt_ids=[[1]] * n,
                   completion_ids=[[2]] * n, columns=columns, group_size=n, rewards={})


def reward_context(plugin, rollout, policy=None, logged=None, acted=None):
    def log(name, value):
        if logged is not None:
            logged[name.removeprefix("cscsql/")] = value

    def record(_plugin, n, of, _hint=None):
        if acted is not None:
            acted.append((n, of))

    return RewardContext(step=0, tokenizer=None, policy=policy or ScriptedPolicy({}), _log=log, _plugin="cscsql",
                         _acted=record, rollout=rollout)


def test_reward_is_execution_match_and_the_vote_is_logged():
    plugin, logged, acted = make_plugin("cscsql"), {}, []
    completions = [WRONG, RIGHT, BROKEN, WRONG, RIGHT_TOO, WRONG]
    got = plugin.reward(reward_context(plugin, rollout(completions), logged=logged, acted=acted))
    assert got == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert acted == [(5, 6)]  # the query naming a missing column did not run
    assert plugin.last_groups == [[(0, 3, 5), (1, 4)]]  # by rows (RIGHT_TOO is written otherwise), BROKEN in none
    # Three WRONG against two right: the vote picks WRONG; the top two groups hold a right query.
    assert logged == {"sample_accuracy": pytest.approx(2 / 6), "vote_accuracy": 0.0, "candidates_hold_right": 1.0}


def test_rows_without_tables_are_left_unscored():
    plugin, acted = make_plugin("cscsql"), []
    arithmetic = rollout(["The answer is 3."] * 2, prompt="What is 1 + 2?", columns={"answer": ["3", "3"]})
    got = plugin.reward(reward_context(plugin, arithmetic, acted=acted))
    assert got == [None, None] and acted == [(0, 2)]


def test_reviser_merges_the_two_largest_groups_and_its_prompts_join_the_pool():
    plugin, logged = make_plugin("cscsql", revise=True), {}
    completions = [WRONG, RIGHT, WRONG, BROKEN, RIGHT_TOO, "SELECT dept FROM staff;"]
    expected = PROBLEM["question"].replace("SQL:\n", (
        f"Drafts:\n1. {WRONG}\nResult: art, 75; law, 15; ops, 72\n2. {RIGHT}\nResult: art, 75; law, 15; ops, 176\nSQL:\n"))
    policy = ScriptedPolicy({expected: [RIGHT]})
    plugin.reward(reward_context(plugin, rollout(completions), policy=policy, logged=logged))
    assert [prompts for prompts, _ in policy.asked] == [[expected]]  # the voted group's query first, then the next
    assert policy.asked[0][1] == {"do_sample": False}
    assert logged["revised_accuracy"] == 1.0 and logged["vote_accuracy"] == 0.0
    assert len(plugin.pending) == 1 and plugin.pending[0]["prompt"] == expected
    assert plugin.pending[0]["setup"] == PROBLEM["setup"] and plugin.pending[0]["solution"] == PROBLEM["solution"]

    class Pool:
        added = []

        def add_rows(self, rows, *_):
            self.added += rows

    pool = Pool()
    ctx = StepContext(step=1, tokenizer=None, policy=policy, _log=lambda *_: None, _plugin="cscsql", _pool=pool)
    plugin.post_step(ctx)
    assert [row["prompt"] for row in pool.added] == [expected] and plugin.pending == []


def test_no_merge_for_one_group_nor_for_a_merge_prompt():
    plugin = make_plugin("cscsql", revise=True)
    policy = ScriptedPolicy({})
    plugin.reward(reward_context(plugin, rollout([RIGHT, RIGHT_TOO, BROKEN]), policy=policy))
    merge = reviser_prompt(PROBLEM["question"], [WRONG, RIGHT], [ok(), ok()])
    plugin.reward(reward_context(plugin, rollout([RIGHT, WRONG], prompt=merge), policy=policy))
    assert policy.asked == [] and plugin.pending == []


def test_a_chat_run_with_the_reviser_is_refused(make_config):
    from stackrl import ConfigError
    from stackrl.run import validate

    validate(make_config(["cscsql"], data={"chat": True}))  # the reward and the vote work on chat prompts
    with pytest.raises(ConfigError, match="cscsql.revise: data.chat is true"):
        validate(make_config(["cscsql"], data={"chat": True}, cscsql={"revise": True}))
