"""The built-in arithmetic task and the shipped ``stackrl/arith-tiny`` checkpoint."""

from __future__ import annotations

import os
import re

import pytest

from stackrl.rewards import exact_match
from stackrl.tasks import BUILTIN_MODELS, TASKS
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset, read_problem, reference_prompt, split_of

_STEP = re.compile(r"^(\d+) ([+*-]) (\d+) = (\d+)$")


def _rows(ds):
    return [dict(r) for r in ds]


def test_registry():
    assert TASKS["arithmetic"] is make_dataset
    path = BUILTIN_MODELS["stackrl/arith-tiny"]()
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json"):
        assert (path / name).is_file(), name


def test_deterministic_per_seed():
    a = make_dataset("train", 60, seed=3)
    assert a.column_names == ["question", "answer", "solution", "category"]
    assert _rows(a) == _rows(make_dataset("train", 60, seed=3))
    assert _rows(a) != _rows(make_dataset("train", 60, seed=4))
    assert _rows(make_dataset("test", 60, seed=3)) == _rows(make_dataset("test", 60, seed=3))


def test_categories_and_distinct():
    ds = make_dataset("test", 120, seed=0)
    assert set(ds["category"]) == set(CATEGORIES)
    assert len(set(ds["question"])) == len(ds)
    only = make_dataset("train", 20, seed=0, categories=[CATEGORIES[0]])
    assert set(only["category"]) == {CATEGORIES[0]}
    with pytest.raises(ValueError):
        make_dataset("train", 5, categories=["no such category"])
    with pytest.raises(ValueError):
        make_dataset("validation", 5)


@pytest.mark.parametrize("split", ["train", "test"])
def test_answers_are_exact(split):
    for row in make_dataset(split, 300, seed=1):
        question = row["question"]
        assert question.startswith("What is ") and question.endswith("?\n")
        assert str(eval(question[len("What is ") : -2], {"__builtins__": {}})) == row["answer"]
        lines = row["solution"].split("\n")
        assert lines[-1] == f"The answer is {row['answer']}."
        steps = int(row["category"].split()[0])
        assert len(lines) == steps + 1
        previous = None
        for line in lines[:-1]:
            left, op, right, result = _STEP.match(line).groups()
            assert eval(f"{left} {op} {right}") == int(result) >= 0
            assert previous is None or left == previous
            previous = result
        assert previous == row["answer"]
        assert exact_match(row["solution"], row["answer"]) == 1.0
        assert exact_match(row["solution"], str(int(row["answer"]) + 1)) == 0.0


def test_a_question_of_the_task_reads_back_as_its_problem():
    for row in make_dataset("train", 120, seed=5):
        assert read_problem(row["question"]) == row
    # well formed, but of no category: a 1-digit operand among 2-digit ones, a single step
    assert read_problem("What is (12 + 3) * 2?")["answer"] == "30"
    assert read_problem("What is (12 + 3) * 2?")["category"] is None
    assert read_problem("What is 3 + 4?")["category"] is None


@pytest.mark.parametrize("text", [
    "What is 3 + 4 * 2?",  # not the left-to-right chain with its parentheses
    "What is (3 - 5) + 1?",  # a value below 0
    "What is (3 + 4) * 12?",  # a multiplier of two digits
    "What is 7?",
    "What is (3 + 4) * 2",
    "Solve (3 + 4) * 2.",
])
def test_text_that_is_not_a_question_of_the_task_is_not_read(text):
    assert read_problem(text) is None


def test_train_test_disjoint():
    train = make_dataset("train", 3000, seed=0)
    test = make_dataset("test", 600, seed=0)
    other_test = make_dataset("test", 600, seed=1)
    assert not set(train["question"]) & (set(test["question"]) | set(other_test["question"]))
    assert all(split_of(q) == "train" for q in train["question"])
    assert all(split_of(q) == "test" for q in test["question"])


@pytest.fixture(scope="module")
def arith_tiny():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = BUILTIN_MODELS["stackrl/arith-tiny"]()
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_checkpoint_loads_offline(arith_tiny):
    model, tokenizer = arith_tiny
    assert tokenizer.pad_token == "<|pad|>" and tokenizer.eos_token == "<|endoftext|>"
    assert tokenizer.padding_side == "left"
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.config.vocab_size == len(tokenizer)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 1 + 2?"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")


def _solved(model, tokenizer, prompts, answers) -> int:
    import torch

    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, do_sample=False, max_new_tokens=60)
    texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return sum(exact_match(t, a) for t, a in zip(texts, answers))


def test_checkpoint_solves_easy_problems(arith_tiny):
    test = make_dataset("test", 32, seed=0, categories=[CATEGORIES[0]])
    assert _solved(*arith_tiny, list(test["question"]), list(test["answer"])) >= 16


def test_checkpoint_follows_a_reference_solution(arith_tiny):
    # The hardest category, which it mostly fails from the bare question: a privileged-context teacher must
    # actually read what it is shown.
    test = make_dataset("test", 32, seed=0, categories=[CATEGORIES[-1]])
    answers = list(test["answer"])
    bare = _solved(*arith_tiny, list(test["question"]), answers)
    shown = _solved(*arith_tiny, [reference_prompt(s, q) for s, q in zip(test["solution"], test["question"])], answers)
    assert shown >= 28 and shown >= bare + 16, (bare, shown)


def test_reading_examples_show_a_spoiled_reference_and_ask_for_it():
    import random

    from transformers import AutoTokenizer

    from stackrl.tasks.pretrain import _reading_batches

    tokenizer = AutoTokenizer.from_pretrained(BUILTIN_MODELS["stackrl/arith-tiny"]())
    train = make_dataset("train", 64, seed=0)
    batch = next(_reading_batches(tokenizer, train, random.Random(0), 200, fraction=0.5, spoiled=1.0))
    shown = changed = 0
    for prompt_ids, target_ids in batch:
        prompt, target = tokenizer.decode(prompt_ids), tokenizer.decode(target_ids[:-1])
        assert target_ids[-1] == tokenizer.eos_token_id
        question = prompt.split("\n\n")[-1]
        truth = next(r["solution"] for r in _rows(train) if r["question"] == question)
        if prompt == question:
            assert target == truth
            continue
        shown += 1
        assert prompt == reference_prompt(target, question)
        differing = sum(a != b for a, b in zip(target.split("\n"), truth.split("\n")))
        assert differing <= 1
        changed += differing
    assert 70 <= shown <= 130 and changed >= 0.9 * shown
