"""The experience library (stackrl.blocks.experience): capacity and eviction, the limit per prompt, lexical
retrieval, its checkpoint state and that state's size at capacity. Its life in real runs (a resume, two processes)
is checked with the importance weights' runs in tests/test_importance.py."""

from __future__ import annotations

import math

import pytest
import torch

from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings, state_bytes
from stackrl.blocks.selfinstruct import rouge_l
from stackrl.context import Rollout
from stackrl.errors import ConfigError, PluginError


def record(prompt=(1, 2), completion=(3,), text="", **fields) -> Experience:
    return Experience(prompt_ids=list(prompt), completion_ids=list(completion), completion=text, **fields)


def library(**settings) -> ExperienceLibrary:
    return ExperienceLibrary(ExperienceSettings(**settings), "method")


def keys(lib) -> list[str]:
    return [r.key for r in lib]


def test_capacity_evicts_the_oldest_and_a_key_added_again_is_the_newest():
    lib = library(capacity=3)
    for name in "abc":
        assert lib.add(record(key=name)) == []
    lib.add(record(key="a", utility=1.0))  # replaced: now the newest
    assert keys(lib) == ["b", "c", "a"] and lib.get("a").utility == 1.0
    evicted = lib.add(record(key="d"))
    assert [r.key for r in evicted] == ["b"] and keys(lib) == ["c", "a", "d"]
    assert lib.add(record(step=7)) and keys(lib)[-1] == "7:5"  # a fresh key: its step and the count of additions


def test_lowest_utility_is_evicted_first_ties_the_oldest():
    lib = library(capacity=3, eviction="lowest_utility")
    for name, utility in (("a", 0.5), ("b", 0.1), ("c", 0.1)):
        lib.add(record(key=name, utility=utility))
    assert [r.key for r in lib.add(record(key="d", utility=0.9))] == ["b"]
    lib.set_utility("a", -1.0)
    assert [r.key for r in lib.add(record(key="e", utility=0.9))] == ["a"]
    assert keys(lib) == ["c", "d", "e"]
    with pytest.raises(PluginError, match="method: no experience record 'zz'"):
        lib.set_utility("zz", 1.0)
    with pytest.raises(PluginError, match="not finite"):
        lib.set_utility("c", math.nan)
    with pytest.raises(PluginError, match="method: utility inf of experience record 'f' is not finite"):
        lib.add(record(key="f", utility=math.inf))
    assert "f" not in lib


def test_per_prompt_limit_evicts_that_prompts_own_record():
    lib = library(capacity=10, per_prompt=2)
    lib.add(record(prompt=(1,), key="p1-a"))
    lib.add(record(prompt=(2,), key="p2-a"))
    lib.add(record(prompt=(1,), key="p1-b"))
    assert [r.key for r in lib.add(record(prompt=(1,), key="p1-c"))] == ["p1-a"]
    assert [r.key for r in lib.of_prompt([1])] == ["p1-b", "p1-c"] and len(lib) == 3


TEXTS = {
    "add": "add 12 and 30 then double the sum",
    "mul": "multiply 4 by 7 and subtract 3",
    "add2": "add 5 and 9 then halve the sum",
}


def filled(retrieval="rouge_l") -> ExperienceLibrary:
    lib = library(indexed="artefact", retrieval=retrieval)
    for name, text in TEXTS.items():
        lib.add(record(key=name, artefact=text, tags=["skill"] if name != "add2" else []))
    return lib


def test_rouge_l_retrieval_ranks_by_the_measure_keeps_tags_and_breaks_ties_to_the_newer():
    lib = filled()
    query = "add 3 and 4 then double the sum"
    found = lib.search(query, k=3)
    assert [(r.key, s) for r, s in found] == sorted(
        [(name, rouge_l(query, text)) for name, text in TEXTS.items()], key=lambda pair: -pair[1]
    )
    assert found[0][0].key == "add"
    assert [r.key for r, _ in lib.search(query, k=3, tags=["skill"])] == ["add", "mul"]
    assert [r.key for r, _ in lib.search(query, k=1)] == ["add"]
    assert lib.search("zebra", k=3) == []  # nothing in common: nothing retrieved
    lib.add(record(key="add-again", artefact=TEXTS["add"]))
    assert [r.key for r, _ in lib.search(TEXTS["add"], k=2)] == ["add-again", "add"]


def test_bm25_retrieval_finds_the_rare_word():
    lib = filled("bm25")
    assert [r.key for r, _ in lib.search("halve it", k=3)] == ["add2"]
    assert lib.search("", k=3) == []
    lib.remove("add2")  # the index follows the records
    assert lib.search("halve it", k=3) == []


def test_state_round_trips_through_a_weights_only_load_and_decides_as_before(tmp_path):
    lib = library(capacity=3, eviction="lowest_utility", indexed="completion")
    lib.add(record(prompt=(5, 6, 7), completion=(8, 9), text="add 1 and 2", rewards={"exact_match": 1.0},
                   step=2, tags=["success"], utility=0.25, behaviour_logprobs=[-0.5, -1.25]))
    lib.add(record(prompt=(5,), completion=(), text="multiply 3 by 4", step=3, artefact="a skill"))
    torch.save(lib.state_dict(), tmp_path / "state.pt")
    again = library(capacity=3, eviction="lowest_utility", indexed="completion")
    again.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert list(again) == list(lib)
    assert again.search("add 1", k=1)[0][0].key == lib.search("add 1", k=1)[0][0].key
    for one in (lib, again):  # the same next key and the same eviction after the load
        one.add(record(step=4, utility=1.0))
        one.add(record(step=5, utility=1.0))
    assert keys(again) == keys(lib) == ["2:0", "4:2", "5:3"]  # "3:1" had the lowest utility, 0
    smaller = library(capacity=1)
    smaller.load_state_dict(lib.state_dict())
    assert keys(smaller) == ["5:3"]


def test_state_size_at_capacity_is_as_documented_and_a_state_past_its_cap_is_refused():
    """The module's figure: 1024 rollouts of a 100-token prompt and a 400-token completion with their log-probs
    and text take about 5.0 MB: 4 bytes a token and a log-prob, the texts, and about 100 bytes a record besides."""
    capacity, length = 1024, 1200  # characters: about a 400-token completion's text
    lib = library(capacity=capacity)
    for i in range(capacity + 10):
        text = f"{i:06d}".ljust(length, "x")  # each its own text (pickle would store one shared string once)
        lib.add(record(prompt=range(100), completion=range(400), text=text, rewards={"exact_match": 1.0},
                       step=i, tags=["success"], behaviour_logprobs=[-0.5] * 400))
    assert len(lib) == capacity
    size = state_bytes(lib.state_dict())
    raw = capacity * (4 * (100 + 400) + 4 * 400 + length)
    assert raw < size < raw + 150 * capacity, (size, raw)
    assert size < 5.1 * 10**6
    capped = library(capacity=capacity, max_state_bytes=size - 1)
    for r in lib:
        capped.add(r)
    with pytest.raises(PluginError, match=r"method\.experience\.max_state_bytes: .* past the cap"):
        capped.state_dict()


def test_a_record_of_a_rollout_row():
    rollout = Rollout(prompts=["q0", [{"role": "user", "content": "q1"}]], completions=["a0", "a1"],
                      prompt_ids=[[1], [2, 3]], completion_ids=[[4], [5, 6]], columns={}, group_size=2,
                      rewards={"exact_match": torch.tensor([0.0, 1.0])})
    made = Experience.of_row(rollout, 1, step=4, tags=["success"])
    assert (made.prompt_ids, made.completion_ids, made.completion, made.prompt) == ([2, 3], [5, 6], "a1", "q1")
    assert (made.rewards, made.step, made.tags, made.prompt_key) == ({"exact_match": 1.0}, 4, ["success"], (2, 3))


@pytest.mark.parametrize("settings, message", [
    ({"capacity": 0}, "method.experience.capacity must be at least 1"),
    ({"per_prompt": -1}, "method.experience.per_prompt must be 0"),
    ({"eviction": "random"}, "method.experience.eviction must be one of oldest, lowest_utility"),
    ({"retrieval": "dense"}, "method.experience.retrieval must be one of rouge_l, bm25"),
    ({"indexed": "answer"}, "method.experience.indexed must be one of prompt, completion, artefact"),
    ({"max_state_bytes": 0}, "method.experience.max_state_bytes must be at least 1"),
])
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        library(**settings)
