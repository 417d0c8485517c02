"""The formats ``stackrl/arith-tools`` learned (stackrl.blocks.env.pretrain_tools): its demonstrations are the
runner's own rows on the calculator and the search tool, its measurement plays episodes as the runner does and counts
calls and their correctness; the search tool over a local corpus (stackrl.blocks.env.search) and the built-in task
``lookup`` it answers (stackrl.tasks.lookup)."""

from __future__ import annotations

import json
import random

import pytest

from stackrl import ConfigError
from stackrl.blocks.env import EnvSettings, Runner, turn_examples
from stackrl.blocks.env.pretrain_tools import demo_examples, demo_turns, tool_figures, use_tool
from stackrl.blocks.env.search import Search
from stackrl.tasks import TASKS
from stackrl.tasks.arithmetic import make_problem
from stackrl.tasks.lookup import NAMES, corpus, value_of
from stackrl.testing.scripted import CharTokenizer, PaddedCharTokenizer, ScriptedModel, ScriptedPlayers

PROBLEM = make_problem(random.Random(3), "3 steps, 2-digit")  # (40 * 4) - 87 + 90: 160, 73, 163
LOOKUP = TASKS["lookup"]("train", size=1, seed=0)[0]


def replayed(turns: list[tuple[str, str | None]]):
    """A scripted policy that writes the demonstration's turns in order."""
    queue = [action for action, _ in turns]
    return ScriptedPlayers(lambda model, text: queue.pop(0))


@pytest.mark.parametrize("problem,environment", [(PROBLEM, "calculator"), (LOOKUP, "search")])
def test_demonstrations_are_the_runners_rows_turn_by_turn(problem, environment):
    turns = demo_turns(problem, random.Random(1), call_share=0.5)
    players = replayed(turns)
    settings = EnvSettings(environment=environment, max_turns=8, max_tokens=400, turn_tokens=80)
    samples = Runner(settings).run([problem["question"]], players.context(group_size=1))
    assert samples.columns["env_end"] == ["done"]
    runner_pairs = turn_examples(samples.prompt_ids[0], samples.completion_ids[0], samples.columns["segments"][0],
                                 CharTokenizer.eos_token_id)
    assert demo_examples(CharTokenizer(), problem, turns) == runner_pairs
    shown = [observation for _, observation in turns[:-1]]
    assert [info.get("tool") for info in samples.columns["env_info"][0]][:-1] == [
        "calc" if environment == "calculator" else "search"] * len(shown)


def test_a_demonstration_leaves_some_steps_to_the_calculator_and_reads_each_result_on():
    turns = demo_turns(PROBLEM, random.Random(1), call_share=0.5)
    assert turns == [("<calc>40 * 4</calc>", "160"), ("160 - 87 = 73\n73 + 90 = 163\nThe answer is 163.", None)]
    assert demo_turns(PROBLEM, random.Random(1), call_share=0.0) == [(PROBLEM["solution"], None)]
    every = demo_turns(PROBLEM, random.Random(1), call_share=1.0)
    assert every == [("<calc>40 * 4</calc>", "160"), ("<calc>160 - 87</calc>", "73"), ("<calc>73 + 90</calc>", "163"),
                     ("The answer is 163.", None)]


def test_a_lookup_demonstration_searches_the_name_then_works_by_hand():
    turns = demo_turns(LOOKUP, random.Random(1), call_share=1.0)
    name = LOOKUP["name"]
    assert turns == [(f"<search>{name}</search>", f"{name} is {value_of(name)}."), (LOOKUP["solution"], None)]
    assert LOOKUP["solution"].startswith(f"{value_of(name)} ")


def calls_every_step(text: str) -> str:
    """A policy that hands each step to the calculator: the next step of the question, read from what it has seen."""
    question = text.split("\n")[0]
    problem = next(p for p in [PROBLEM] if p["question"].strip() == question)
    steps = [line.split(" = ")[0] for line in problem["solution"].split("\n")[:-1]]
    done = text.count("<calc>")
    return f"<calc>{steps[done]}</calc>" if done < len(steps) else f"The answer is {text.rstrip().split()[-1]}."


def test_use_tool_plays_as_the_runner_and_the_figures_count_calls():
    model = ScriptedModel(calls_every_step)
    played = use_tool(model, PaddedCharTokenizer(), [PROBLEM])
    assert played[0]["calls"] == [("40 * 4", "160"), ("160 - 87", "73"), ("73 + 90", "163")]
    assert played[0]["completion"] == ("<calc>40 * 4</calc>\n160\n<calc>160 - 87</calc>\n73\n<calc>73 + 90</calc>\n163\n"
                                       "The answer is 163.")
    assert model.seen[1] == PROBLEM["question"] + "<calc>40 * 4</calc>\n160\n"  # eos held back, result shown
    assert tool_figures([PROBLEM], played) == {"accuracy": 1.0, "call_rate": 1.0, "call_correct": 1.0, "any_call": 1.0}
    wrong = [{"completion": "<calc>4 * 4</calc>\n16\nThe answer is 16.", "calls": [("4 * 4", "16")]}]
    assert tool_figures([PROBLEM], wrong) == {"accuracy": 0.0, "call_rate": 1 / 3, "call_correct": 0.0, "any_call": 1.0}
    searched = [{"completion": "x", "calls": [(LOOKUP["name"], "..."), ("zz", "no results")]}]
    assert tool_figures([LOOKUP], searched)["call_correct"] == 0.5


def test_search_shows_the_best_documents_or_no_results():
    search = Search()
    search.reset()
    name = NAMES[0]
    assert search.search(name) == f"{name} is {value_of(name)}."
    assert search.search("nothing here") == "no results"
    assert Search(retrieval="rouge_l").search(name) == f"{name} is {value_of(name)}."
    assert len(corpus()) == len(NAMES) == len(set(NAMES)) and {value_of(n) for n in NAMES} == set(range(1, 100))


def test_search_reads_a_corpus_file_and_keeps_k_best(tmp_path):
    lines = tmp_path / "docs.jsonl"
    lines.write_text("\n".join(json.dumps({"text": t}) for t in
                               ["red apples grow", "apples and pears", "blue sky", "apples apples apples"]) + "\n")
    found = Search(corpus=str(lines), k=2).search("apples").split("\n")
    assert len(found) == 2 and "blue sky" not in found and found[0] == "apples apples apples"
    plain = tmp_path / "docs.txt"
    plain.write_text("one fish\ntwo fish\n")
    assert Search(corpus=str(plain), k=5).search("two") == "two fish"


@pytest.mark.parametrize("kwargs,message", [
    ({"k": 0}, "env.kwargs.k: must be a positive integer"),
    ({"retrieval": "dense"}, "env.kwargs.retrieval: must be one of rouge_l, bm25"),
    ({"corpus": "/no/such/file.jsonl"}, "env.kwargs.corpus: no file /no/such/file.jsonl"),
])
def test_search_settings_are_checked(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Search(**kwargs)


def test_a_corpus_that_is_not_json_lines_is_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"body": "x"}\n')
    with pytest.raises(ConfigError, match="env.kwargs.corpus: .*bad.jsonl is not JSON lines with a 'text' field"):
        Search(corpus=str(bad))


def test_the_lookup_task_names_the_first_number_and_keeps_the_splits_apart():
    train, test = TASKS["lookup"]("train", size=200, seed=0), TASKS["lookup"]("test", size=50, seed=0)
    assert not set(train["question"]) & set(test["question"])
    for row in train:
        first = row["solution"].split(" ")[0]
        assert row["question"].startswith("What is ") and row["name"] in row["question"]
        assert int(first) == value_of(row["name"]) and first not in row["question"].split("?")[0].split(" ")[2:3]
    assert TASKS["lookup"]("train", size=200, seed=0)["question"] == train["question"]  # seeded
