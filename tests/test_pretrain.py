"""stackrl.tasks.pretrain, the script that makes the built-in models: what its snapshots and records hold."""

from __future__ import annotations

import json

from stackrl.tasks import arith_tiny_path
from stackrl.tasks.pretrain import RECORD_FILE, file_hash, recipe_hash


def test_a_snapshot_of_the_roles_phase_is_the_run_that_stops_there(tmp_path):
    """What lets the shipped checkpoint be a snapshot: a run of k steps makes the same weights."""
    from safetensors.torch import load_file

    from stackrl.tasks.pretrain import pretrain

    quick = dict(
        init=arith_tiny_path(), reading_steps=0, compare_steps=1, batch_size=4, train_size=50, eval_per_category=1,
        skills_mix="solve=1,judge=1,repair=1,redo=1", redo_problems=6, threads=1,
    )
    pretrain(tmp_path / "long", skills_steps=3, save_every=2, **quick)
    pretrain(tmp_path / "short", skills_steps=2, **quick)
    snapshot, short = tmp_path / "long-skills2", tmp_path / "short"
    record = json.loads((snapshot / RECORD_FILE).read_text())
    assert record["snapshot"] == {"phase": "skills", "step": 2} and record["settings"]["skills_steps"] == 3
    assert json.loads((short / RECORD_FILE).read_text())["summary"]["skills"]["judge"]["problems"] == 6
    weights = load_file(snapshot / "model.safetensors")
    assert weights.keys() == load_file(short / "model.safetensors").keys()
    assert all((weights[k] == v).all() for k, v in load_file(short / "model.safetensors").items())
    initial = load_file(arith_tiny_path() / "model.safetensors")
    assert any((weights[k] != v).any() for k, v in initial.items())
    assert record["recipe_sha256"] == recipe_hash()
    assert record["init_sha256"] == file_hash(arith_tiny_path() / "model.safetensors")


def test_a_mark_example_ends_where_the_judge_reply_decides():
    """The "mark" role's examples: the decisive "no" of a wrong attempt, a "yes" of a right one."""
    import random

    from stackrl.tasks.pretrain import _mark_cut
    from stackrl.tasks.roles import judge_reply

    rng = random.Random(0)
    assert _mark_cut("3 + 4 = 8\n8 * 2 = 16\nThe answer is 16.", rng) == ("3 + 4 = 7 | 8 ", "no")
    wrong_answer = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 15."
    assert _mark_cut(wrong_answer, rng) == ("3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 14 yes\n14 | 15 ", "no")
    right = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."
    for _ in range(5):
        head, mark = _mark_cut(right, rng)
        assert mark == "yes" and judge_reply(right).startswith(head + mark)


def test_a_redo_example_retries_after_a_wrong_attempt_the_model_sampled_on_a_training_problem():
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.rewards import exact_match
    from stackrl.tasks.arithmetic import make_dataset, split_of
    from stackrl.tasks.pretrain import _misses, _skills_batches, generate
    from stackrl.tasks.roles import retry_prompt

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(arith_tiny_path())
    tokenizer = AutoTokenizer.from_pretrained(arith_tiny_path())
    problems = make_dataset("train", 12, seed=4)
    misses = _misses(model, tokenizer, problems, seed=0)
    attempts = generate(model, tokenizer, problems["question"], greedy=False, seed=0)
    wrong = [(q, a, s) for q, a, s, r in zip(problems["question"], attempts, problems["solution"], problems["answer"])
             if not exact_match(a, r)]
    assert misses == wrong and 0 < len(misses) < len(problems)
    assert all(split_of(q) == "train" and q in problems["question"] for q, _, _ in misses)

    batch = next(_skills_batches(tokenizer, problems, random.Random(0), 8, {"redo": 1.0}, misses))
    shown = {(tokenizer.decode(p), tokenizer.decode(c, skip_special_tokens=True)) for p, c in batch}
    assert shown <= {(retry_prompt(q, a), s) for q, a, s in misses}
    assert all(c[-1] == tokenizer.eos_token_id for _, c in batch)


def test_retries_after_a_check_and_after_two_attempts_follow_a_wrong_attempt_and_target_the_solution():
    import random

    from transformers import AutoTokenizer

    from stackrl.tasks.arithmetic import make_dataset
    from stackrl.tasks.pretrain import _skills_batches
    from stackrl.tasks.roles import checked_retry_prompt, judge_reply, parse_verdict, retry_prompt

    tokenizer = AutoTokenizer.from_pretrained(arith_tiny_path())
    problems = make_dataset("train", 30, seed=4)
    own = (problems[0]["question"], "1 + 2 = 4\nThe answer is 4.", problems[0]["solution"])
    misses = [own, (problems[1]["question"], "not a solution", problems[1]["solution"])]
    solutions = dict(zip(problems["question"], problems["solution"]))
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731

    checked = next(_skills_batches(tokenizer, problems, random.Random(0), 40, {"recheck": 1.0}, misses))
    seen_own = False
    for prompt, target in ((decode(p), decode(c)) for p, c in checked):
        question = next(q for q in solutions if prompt.startswith(q))
        attempt = prompt[len(question):].split("\nCheck:\n")[0]
        assert prompt == checked_retry_prompt(question, attempt, judge_reply(attempt))
        assert parse_verdict(judge_reply(attempt)) is False and target == solutions[question]
        seen_own |= (question, attempt) == own[:2]
    assert seen_own  # the model's own wrong attempts, those a check can go through, are among them

    debated = next(_skills_batches(tokenizer, problems, random.Random(0), 40, {"debate": 1.0}, misses))
    rights = 0
    for prompt, target in ((decode(p), decode(c)) for p, c in debated):
        question = next(q for q in solutions if prompt.startswith(q))
        first, second = prompt[len(question):].split("\nTry again.\n")[:2]
        assert prompt == retry_prompt(retry_prompt(question, first), second) and target == solutions[question]
        shown_right = [attempt == solutions[question] for attempt in (first, second)]
        assert sum(shown_right) <= 1  # one of the two is wrong
        rights += sum(shown_right)
    assert 0 < rights < len(debated)


def test_a_pose_example_lists_training_questions_and_continues_with_two_new_problems():
    import random

    from transformers import AutoTokenizer

    from stackrl.tasks.arithmetic import make_dataset, read_problem
    from stackrl.tasks.posing import parse_problems, request_text
    from stackrl.tasks.pretrain import _skills_batches

    tokenizer = AutoTokenizer.from_pretrained(arith_tiny_path())
    problems = make_dataset("train", 30, seed=4)
    batch = next(_skills_batches(tokenizer, problems, random.Random(0), 16, {"pose": 1.0}))
    for prompt_ids, target_ids in batch:
        prompt, target = tokenizer.decode(prompt_ids), tokenizer.decode(target_ids, skip_special_tokens=True)
        shown = parse_problems(prompt.split("\n", 1)[1], continued=False)  # the last number has no item yet
        assert prompt == request_text(shown) and 2 <= len(shown) <= 6
        assert all(question + "\n" in problems["question"] for question in shown)
        written = parse_problems(target, continued=True)
        assert len(written) == 2 and all(read_problem(w)["category"] is not None for w in written)
        assert target_ids[-1] == tokenizer.eos_token_id
