"""Tests of the `toolstar` plugin: the hierarchy on hand-built episodes, the reward hook on a hand-built rollout of
the runner's columns, the plugin's two-tool environment, and the host's conformance suite."""

import pytest

from stackrl import RewardContext, Rollout
from stackrl.blocks.env import END_COLUMN, INFO_COLUMN
from stackrl.blocks.env.protocol import ToolCall
from stackrl.blocks.env.runner import construct, tool_outcome
from stackrl.blocks.env.settings import EnvSettings
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.scripted import ScriptedPolicy
from stackrl_toolstar.hierarchy import Episode, episode, hierarchical_reward
from stackrl_toolstar.toolbox import Toolbox

LEVELS = dict(malformed=-1.0, wrong=0.0, right=1.0, bonus=0.1, min_tools=2)
SEARCH, CALC, RAISED = {"tool": "search"}, {"tool": "calc"}, {"tool": "calc", "tool_error": "raised ValueError: x"}


class TestConformance(PluginConformance):
    plugin_name = "toolstar"
    refused_settings = [
        ({"malformed": 0.5}, "must rise"),
        ({"wrong": 1.0}, "must rise"),
        ({"bonus": -0.1}, "non-negative"),
        ({"min_tools": 0}, "at least 1"),
        ({"metric": "f1"}, "built-in outcome reward"),
    ]


# -- the hierarchy ----------------------------------------------------------------------------------------------------

def test_episode_facts_read_the_runner_columns():
    assert episode([SEARCH, CALC, {}], "done", True) == Episode(True, frozenset({"search", "calc"}), 0)
    # a raised call is not a successful one; a repeated tool counts once
    assert episode([SEARCH, RAISED, SEARCH, {}], "done", True) == Episode(True, frozenset({"search"}), 1)
    assert episode(None, None, True) == Episode(True, frozenset(), 0)  # a rollout without the runner
    for infos, end, answered in [([SEARCH, {}], "budget", True), ([SEARCH, CALC], "turns", True),
                                 ([{"unknown_tool": "python"}, {}], "done", True),
                                 ([{"unparsed": True}, {}], "done", True), ([SEARCH, {}], "done", False)]:
        assert not episode(infos, end, answered).well_formed, (infos, end, answered)


@pytest.mark.parametrize("tools, correct, formed, want", [
    ({"search", "calc"}, True, True, 1.1),   # right with both tools: the bonus
    ({"search"}, True, True, 1.0),           # right with one tool
    (set(), True, True, 1.0),                # right with none
    ({"search", "calc"}, False, True, 0.0),  # wrong: no bonus however many tools
    ({"search", "calc"}, True, False, -1.0), # malformed: lowest, whatever the answer
    (set(), False, False, -1.0),
])
def test_hierarchical_reward_by_hand(tools, correct, formed, want):
    got = hierarchical_reward(Episode(formed, frozenset(tools), 0), correct, **LEVELS)
    assert got == pytest.approx(want)


def test_min_tools_and_levels_are_the_config_s():
    facts = Episode(True, frozenset({"search", "calc"}), 0)
    assert hierarchical_reward(facts, True, **{**LEVELS, "min_tools": 3}) == 1.0
    assert hierarchical_reward(facts, True, **{**LEVELS, "bonus": 0.5, "right": 2.0}) == 2.5
    assert hierarchical_reward(Episode(False, frozenset(), 0), True, **{**LEVELS, "malformed": -3.0}) == -3.0


# -- the reward hook on a hand-built rollout --------------------------------------------------------------------------

def rollout(rows):
    """rows: (completion, answer, env_info, env_end)."""
    n = len(rows)
    columns = {"answer": [r[1] for r in rows], INFO_COLUMN: [r[2] for r in rows], END_COLUMN: [r[3] for r in rows]}
    return Rollout(prompts=["What is (kavo + 4) * 3?\n"] * n, completions=[r[0] for r in rows],
                   prompt_ids=[[1]] * n, completion_ids=[[2]] * n, columns=columns, group_size=n, rewards={})


def context(plugin, batch, logged, acted):
    return RewardContext(step=0, tokenizer=None, policy=ScriptedPolicy({}),
                         _log=lambda k, v: logged.__setitem__(k.removeprefix("toolstar/"), v), _plugin="toolstar",
                         _acted=lambda _p, n, of, _hint=None: acted.append((n, of)), rollout=batch)


RIGHT = "<search>kavo</search>\nkavo is 37.\n<calc>37 + 4</calc>\n41\n41 * 3 = 123\nThe answer is 123."
WRONG = "<search>kavo</search>\nkavo is 37.\n<calc>37 + 4</calc>\n41\n41 * 3 = 124\nThe answer is 124."


def test_reward_hook_scores_each_row_on_the_hierarchy():
    plugin, logged, acted = make_plugin("toolstar"), {}, []
    batch = rollout([
        (RIGHT, "123", [SEARCH, CALC, {}], "done"),       # right, both tools: 1.1
        (WRONG, "123", [SEARCH, CALC, {}], "done"),       # wrong, both tools: 0
        (RIGHT, "123", [SEARCH, RAISED, {}], "done"),     # right, calc raised: one tool, 1.0
        (RIGHT, "123", [SEARCH, CALC, {}], "budget"),     # no answer turn: -1
        ("<search>kavo</search>\nkavo is 37.", "123", [SEARCH, {}], "done"),  # no readable answer: -1
        (RIGHT, None, [SEARCH, CALC, {}], "done"),        # no reference: not scored
    ])
    got = plugin.reward(context(plugin, batch, logged, acted))
    assert got[:5] == pytest.approx([1.1, 0.0, 1.0, -1.0, -1.0]) and got[5] is None
    assert acted == [(5, 6)]
    assert logged == pytest.approx({"malformed": 0.4, "wrong": 0.2, "right": 0.4, "multi_tool": 0.2, "raised": 0.2})


def test_reward_hook_without_the_runner_scores_the_answer_alone():
    plugin, logged, acted = make_plugin("toolstar"), {}, []
    batch = Rollout(prompts=["What is 3 + 4?\n"] * 3, completions=["3 + 4 = 7\nThe answer is 7.",
                                                                    "3 + 4 = 8\nThe answer is 8.", "3 + 4 = 7"],
                    prompt_ids=[[1]] * 3, completion_ids=[[2]] * 3, columns={"answer": ["7"] * 3}, group_size=3)
    assert plugin.reward(context(plugin, batch, logged, acted)) == [1.0, 0.0, -1.0]
    assert acted == [(3, 3)]


# -- the two-tool environment -----------------------------------------------------------------------------------------

def test_toolbox_searches_calculates_and_raises_on_a_mistake():
    box = Toolbox()
    box.reset(question="What is (kavo + 4) * 3?\n")
    assert box.calc("37 + 4") == "41" and box.calc("7 / 2") == "3.5"
    from stackrl.tasks.lookup import NAMES, value_of

    assert f"{NAMES[0]} is {value_of(NAMES[0])}." in box.search(NAMES[0]).splitlines()
    with pytest.raises(ValueError):
        box.calc("kavo + 4")


def test_the_runner_records_a_raised_calc_as_a_tool_error():
    settings = EnvSettings(environment="stackrl_toolstar.toolbox:Toolbox", actions="tag")
    play = construct(Toolbox, {}, 1, 0)
    play.reset({"prompt": "What is 3 + 4?\n"})
    assert tool_outcome(play, ToolCall("calc", ("3 + 4",), {}), settings).info == {"tool": "calc"}
    failed = tool_outcome(play, ToolCall("calc", ("three + 4",), {}), settings)
    assert "tool_error" in failed.info and failed.info["tool"] == "calc"
    assert failed.observation.startswith("error: ValueError")
