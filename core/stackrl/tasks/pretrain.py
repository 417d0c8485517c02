"""Make the built-in ``stackrl/arith-tiny`` checkpoint: a tiny Qwen2 taught the arithmetic task by SFT (and, with
a third phase, such a model taught to judge and repair attempts as well).

Remake it (CPU, about 30 minutes; one thread, so the result does not depend on the core count)::

    HF_HUB_OFFLINE=1 python -m stackrl.tasks.pretrain --out core/stackrl/assets/arith-tiny --threads 1

Phase 1, solving: generate train problems (:func:`stackrl.tasks.arithmetic.make_dataset`, split "train"), train a
byte-level BPE tokenizer on their text (:func:`stackrl.tiny.train_tokenizer`), build a randomly initialised Qwen2
(:func:`stackrl.tiny.tiny_model`), and train it with a plain seeded torch loop on ``question + solution + eos``
with the loss on the solution and eos only. The prompt and the solution are tokenized separately, exactly as a
trainer sees a prompt and a generated completion.

Phase 2, reading: the model learns to follow a reference solution placed before the question
(:data:`stackrl.tasks.arithmetic.REFERENCE_TEMPLATE`), which is what a privileged-context teacher (OPSD, TRACE)
shows it. Half the prompts show the reference, and each shown reference has one step's result changed, the
target being the reference as shown: with correct references only, the model learns that it can ignore them
(it mostly recomputes them). The result is saved in float32 with its tokenizer and generation config.

What the command above made (the shipped checkpoint; ``--init`` with the phase-1 checkpoint runs phase 2
alone): vocab 280, Qwen2 with hidden 128, 4 layers, 4 heads, MLP 512 -> 1,122,944 parameters, 4.4 MB in
float32. Phase 1: 1000 steps of batch 64, AdamW lr 3e-3 with 50 warmup steps and cosine decay to 10%, 677 s,
final loss 0.07. Phase 2: 800 steps of batch 64 at a constant lr 1e-3, 1043 s, final loss 0.07. pass@1 on 300
held-out test problems (50 per category, ``make_dataset("test", 300, seed=0)``), from the bare question:

    category            greedy   sampled (temperature 1.0)
    2 steps, 1-digit     0.80     0.84
    3 steps, 1-digit     0.80     0.52
    2 steps, 2-digit     0.32     0.24
    4 steps, 1-digit     0.56     0.30
    3 steps, 2-digit     0.14     0.04
    4 steps, 2-digit     0.12     0.02
    all                  0.46     0.33

Given the reference solution before the question, its greedy accuracy is 1.00 (0.98 on 4 steps, 2-digit).
Easy categories are mostly solved and hard ones mostly not (carries in 2-digit sums and 3-digit times 1-digit
products), which leaves room for RL.

Phase 3, roles (``--compare-steps``, ``--skills-steps``; not part of arith-tiny, see
core/stackrl/assets/arith-skills/README.md for the model it makes): starting from arith-tiny (``--init``,
``--reading-steps 0``), first the model's own attempts at ``--redo-problems`` training problems are sampled
(temperature 1, seeded) and the wrong ones kept; then the marks of check lines ("7 | 8 " -> "no",
:func:`stackrl.tasks.roles.compare_line`) among solving examples, then a mix where each example teaches one role
drawn with the weights of ``--skills-mix``: solving, reading a spoiled reference (so neither earlier skill fades),
judging an attempt, retrying after one (:mod:`stackrl.tasks.roles`; "repair": attempts shown with one slip, half
the time for a judge, three times in four for a retry; "redo": a retry after one of those sampled wrong attempts,
the problem's solution the target), retrying after a wrong attempt and a perfect check of it ("recheck") or after
two attempts, one wrong ("debate"), posing two new problems after a list of training questions ("pose", the
request of :func:`stackrl.tasks.posing.request_text`), a judge reply cut before one of its marks with the mark as
target, and the compare drill again. The loss is a mean over examples, so a one-word target weighs as much as a reply. The rate is constant after warmup, so
the snapshot a run saves at step k (``--save-every``) is the model a run with ``--skills-steps k`` makes. Every
checkpoint written carries ``stackrl_pretrain.json``: its settings, the hash of the recipe (:func:`recipe_hash`),
the hash of the starting weights, and the final figures (or, for a snapshot, its phase and step).

What each of these choices was for (teacher-forced P("no") at a check line's mark, on held-out lines):

- Judge replies alone, the loss a mean over tokens: the mark is a few tokens of a hundred and "no" ends only the
  check of a wrong attempt, so the mark kept to its prior (balanced accuracy 0.50-0.53 up to step 550).
- The compare drill alone learns the comparison (0.97 balanced by step 300); mixed into the roles from the start,
  even with a mean over examples and the cut replies, the marks kept to their prior for 300 steps.
- Drill alone first, then the mix: the marks in replies reach 0.94 by step 200 of the mix, and the judge's balanced
  accuracy (generated, 90 problems) 0.44, 0.56, 0.68 at steps 200, 300, 400; what limits it is the worked-out
  value, which next to a slipped line is often the slipped value copied. But the drill alone wiped out solving
  (greedy pass@1 0.47 -> 0.00 after 200 steps; 0.11 after 300 steps of the mix), hence the solving examples in the
  compare phase.
- Retries after slipped attempts only ("repair=2"): on its own wrong attempts the model mostly repeated them (fix
  0.06, keep 0.77): they are not slips of a right solution, and after a slip the right retry copies all but one
  line. With half of those retries after its own sampled wrong attempts ("repair=1,redo=1") it solves afresh
  instead (fix 0.14, keep 0.81, on the 300 held-out problems); "repair=0.5,redo=1.5" made a worse retry (fix
  0.08, keep 0.63).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

__all__ = ["RECORD_FILE", "evaluate", "evaluate_skills", "file_hash", "generate", "main", "pretrain", "recipe_hash"]


def generate(
    model,
    tokenizer,
    prompts: list[str],
    *,
    greedy: bool = True,
    batch_size: int = 64,
    max_new_tokens: int = 96,
    temperature: float = 1.0,
    seed: int = 0,
) -> list[str]:
    """The completion of each prompt, without eos. ``greedy=False`` samples at ``temperature`` with no top-k/top-p,
    seeded with ``seed``; the global torch random state is left as it was."""
    import torch

    was_training = model.training
    model.eval()
    texts = []
    sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
    kwargs = {"do_sample": False} if greedy else sampling
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for start in range(0, len(prompts), batch_size):
                enc = tokenizer(
                    prompts[start : start + batch_size],
                    return_tensors="pt",
                    padding=True,
                    padding_side="left",
                    add_special_tokens=False,
                )
                with torch.no_grad():
                    out = model.generate(
                        **enc,
                        max_new_tokens=max_new_tokens,
                        eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id,
                        **kwargs,
                    )
                texts += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    finally:
        model.train(was_training)
    return texts


def _by_category(values, categories) -> dict[str, float]:
    """The mean of ``values`` overall ("all") and per category."""
    groups: dict[str, list[float]] = {}
    for value, category in zip(values, categories):
        groups.setdefault(category, []).append(float(value))
    result = {"all": sum(map(float, values)) / max(1, len(values))}
    result.update({c: sum(v) / len(v) for c, v in groups.items()})
    return result


def evaluate(model, tokenizer, dataset, *, greedy: bool = True, temperature: float = 1.0, seed: int = 0) -> dict:
    """pass@1 of ``model`` on ``dataset`` (columns question, answer, category) with exact_match.

    Returns ``{"all": acc, <category>: acc, ...}``. ``greedy=False`` samples at ``temperature`` with no top-k/top-p.
    """
    from stackrl.rewards import exact_match

    texts = generate(model, tokenizer, dataset["question"], greedy=greedy, temperature=temperature, seed=seed)
    return _by_category([exact_match(t, a) for t, a in zip(texts, dataset["answer"])], dataset["category"])


def evaluate_skills(model, tokenizer, dataset, *, seed: int = 0) -> dict[str, dict]:
    """The figures of :mod:`stackrl.tasks.skills` on ``dataset``: verdicts greedy; first attempts, retries (bare,
    after the model's own greedy check and after a perfect one), replies after two attempts and posed problems
    sampled at temperature 1 (as ``stackrl eval`` measures judging and repairing with ``eval.temperature`` 0 and
    1). Problems are posed in reply to requests listing 4 of the dataset's questions each."""
    from stackrl.rewards import exact_match
    from stackrl.tasks.roles import judge_prompt, judge_reply
    from stackrl.tasks.skills import (
        debate_figures, debate_prompts, judge_figures, judge_prompts, pose_figures, pose_requests, recheck_prompts,
        repair_figures, repair_prompts,
    )

    questions, solutions, answers, categories = (
        list(dataset[c]) for c in ("question", "solution", "answer", "category")
    )
    sample = lambda prompts, offset: generate(model, tokenizer, prompts, greedy=False, seed=seed + offset)  # noqa: E731
    right = lambda texts: [exact_match(t, a) for t, a in zip(texts, answers)]  # noqa: E731
    replies = generate(model, tokenizer, judge_prompts(questions, solutions, seed), max_new_tokens=128)
    attempts = sample(questions, 0)
    first = right(attempts)
    second = right(sample(repair_prompts(questions, attempts), 1))
    checks = generate(model, tokenizer, [judge_prompt(q, a) for q, a in zip(questions, attempts)], max_new_tokens=128)
    own_checked = right(sample(recheck_prompts(questions, attempts, checks), 1))
    true_checks = [judge_reply(a) if _well_formed(a) else c for a, c in zip(attempts, checks)]
    true_checked = right(sample(recheck_prompts(questions, attempts, true_checks), 1))
    others = sample(questions, 2)
    debated = right(sample(debate_prompts(questions, attempts, others), 3))
    requests, shown = pose_requests(questions)
    posed = sample(requests, 4)
    return {
        "judge": judge_figures(replies, categories),
        "repair": repair_figures(first, second, categories),
        "repair_after_own_check": repair_figures(first, own_checked, categories),
        "repair_after_true_check": repair_figures(first, true_checked, categories),
        "debate": debate_figures(first, right(others), debated),
        "pose": pose_figures(posed, shown),
    }


def _fmt(result: dict[str, float]) -> str:
    return "  ".join(f"{k}: {v:.2f}" for k, v in result.items())


def _example(tokenizer, prompt: str, solution: str, eos: bool = True) -> tuple[list[int], list[int]]:
    """(prompt ids, solution ids + eos), prompt and solution tokenized apart as a trainer sees them; without eos
    for a target that ends inside a reply."""
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return encode(prompt), encode(solution) + [tokenizer.eos_token_id] * eos


def _solving_batches(tokenizer, train, rng: random.Random, batch_size: int):
    """Question -> solution examples in epochs of a fresh shuffle of ``train``."""
    examples = [_example(tokenizer, q, s) for q, s in zip(train["question"], train["solution"])]
    order = list(range(len(examples)))
    rng.shuffle(order)
    pos = 0
    while True:
        if pos + batch_size > len(order):
            rng.shuffle(order)
            pos = 0
        yield [examples[i] for i in order[pos : pos + batch_size]]
        pos += batch_size


def _reading_batches(tokenizer, train, rng: random.Random, batch_size: int, fraction: float, spoiled: float):
    """Problems drawn from ``train`` with replacement; a ``fraction`` of the prompts show a reference solution
    before the question (a ``spoiled`` share of them with one wrong step), and the target is that reference."""
    from stackrl.tasks.arithmetic import reference_prompt

    while True:
        batch = []
        for i in [rng.randrange(len(train)) for _ in range(batch_size)]:
            question, solution = train[i]["question"], train[i]["solution"]
            prompt = question
            if rng.random() < fraction:
                if rng.random() < spoiled:
                    solution = _spoiled(solution, rng)
                prompt = reference_prompt(solution, question)
            batch.append(_example(tokenizer, prompt, solution))
        yield batch


# The share of attempts shown with a slip, by role (half where not named). A retry mostly follows a wrong attempt:
# with half of them right the model learned to copy the attempt.
_SLIPPED = {"repair": 0.75}


def _skills_batches(tokenizer, train, rng: random.Random, batch_size: int, mix: dict[str, float], misses=()):
    """Problems drawn from ``train`` with replacement, each taught in one role drawn with the weights of ``mix``:
    "solve" (question -> solution), "judge" and "repair" (:mod:`stackrl.tasks.roles`; attempts shown with one slip
    as ``_SLIPPED`` says), "redo" (a retry after one of ``misses``, the (question, wrong attempt, solution) triples
    of :func:`_misses`), "recheck" (a retry after a wrong attempt and its check, :func:`_wrong_attempt`), "debate"
    (a retry after two attempts, a wrong one and, half the time, a right one, in either order), "pose" (2 to 6
    training questions listed as :func:`stackrl.tasks.posing.request_text` lists them, continued by two new
    problems of any category), "mark" (a judge reply cut before one mark, that mark the target), "compare" (a
    check line's two numbers alone, 1 to 3 digits, the second slipped half the time, and its mark) and "read" (a
    reference solution, spoiled, before the question, as in phase 2)."""
    from stackrl.tasks.arithmetic import CATEGORIES, make_problem, reference_prompt
    from stackrl.tasks.posing import request_text
    from stackrl.tasks.roles import (
        _SLIPS, checked_retry_prompt, compare_line, judge_prompt, judge_reply, retry_prompt, slip,
    )

    roles, weights = list(mix), list(mix.values())
    checkable = [miss for miss in misses if _well_formed(miss[1])]
    while True:
        batch = []
        for _ in range(batch_size):
            role = rng.choices(roles, weights)[0]
            if role == "compare":
                expected = rng.randrange(10 ** rng.randint(1, 3))
                written = max(0, expected + rng.choice(_SLIPS)) if rng.random() < 0.5 else expected
                line = compare_line(expected, written)
                cut = line.rindex(" ") + 1
                batch.append(_example(tokenizer, line[:cut], line[cut:], eos=False))
                continue
            if role == "redo":
                question, attempt, solution = misses[rng.randrange(len(misses))]
                batch.append(_example(tokenizer, retry_prompt(question, attempt), solution))
                continue
            if role == "pose":
                shown = [train[rng.randrange(len(train))]["question"] for _ in range(rng.randint(2, 6))]
                first, second = (make_problem(rng, rng.choice(CATEGORIES))["question"].strip() for _ in range(2))
                batch.append(_example(tokenizer, request_text(shown), f" {first}\n{len(shown) + 2}. {second}"))
                continue
            if role in ("recheck", "debate"):
                question, attempt, solution = _wrong_attempt(train, checkable, rng)
                if role == "recheck":
                    prompt = checked_retry_prompt(question, attempt, judge_reply(attempt))
                else:
                    other = solution if rng.random() < 0.5 else slip(solution, rng)
                    first, second = rng.sample([attempt, other], 2)
                    prompt = retry_prompt(retry_prompt(question, first), second)
                batch.append(_example(tokenizer, prompt, solution))
                continue
            row = train[rng.randrange(len(train))]
            question, solution = row["question"], row["solution"]
            attempt = slip(solution, rng) if rng.random() < _SLIPPED.get(role, 0.5) else solution
            if role == "solve":
                batch.append(_example(tokenizer, question, solution))
            elif role == "judge":
                batch.append(_example(tokenizer, judge_prompt(question, attempt), judge_reply(attempt)))
            elif role == "repair":
                batch.append(_example(tokenizer, retry_prompt(question, attempt), solution))
            elif role == "mark":
                head, mark = _mark_cut(attempt, rng)
                batch.append(_example(tokenizer, judge_prompt(question, attempt) + head, mark, eos=False))
            else:
                shown = _spoiled(solution, rng)
                batch.append(_example(tokenizer, reference_prompt(shown, question), shown))
        yield batch


def _wrong_attempt(train, misses, rng: random.Random) -> tuple[str, str, str]:
    """(question, wrong attempt, solution): half the time one of the model's own wrong attempts (``misses``, those
    a check can go through), else a training problem's solution with a slip."""
    from stackrl.tasks.roles import slip

    if misses and rng.random() < 0.5:
        return misses[rng.randrange(len(misses))]
    row = train[rng.randrange(len(train))]
    return row["question"], slip(row["solution"], rng), row["solution"]


def _well_formed(attempt: str) -> bool:
    """Whether ``attempt`` is written in the task's solution format, so a check can go through its lines."""
    from stackrl.tasks.roles import _steps

    try:
        _steps(attempt)
    except ValueError:
        return False
    return True


def _misses(model, tokenizer, problems, seed: int) -> list[tuple[str, str, str]]:
    """(question, attempt, solution) for each of ``problems`` whose attempt by ``model``, sampled at temperature 1
    with ``seed``, is wrong.

    Retrying after slipped attempts alone, the model learned to copy its own wrong attempts (fixing 6% of them):
    they are not slips of a right solution, and after a slip the right retry copies all but one line.
    """
    from stackrl.rewards import exact_match

    attempts = generate(model, tokenizer, problems["question"], greedy=False, seed=seed, batch_size=256)
    rows = zip(problems["question"], attempts, problems["solution"], problems["answer"])
    return [(q, attempt, s) for q, attempt, s, a in rows if not exact_match(attempt, a)]


def _mark_cut(attempt: str, rng: random.Random) -> tuple[str, str]:
    """The judge reply to ``attempt`` cut before one of its marks, and that mark: the "no" that ends the check of a
    wrong attempt, or any mark of a right one (so both marks are equally common)."""
    from stackrl.tasks.roles import DIFFERENT, judge_reply

    lines = judge_reply(attempt).split("\n")[:-1]  # the check lines, without the verdict
    at = len(lines) - 1 if lines[-1].endswith(" " + DIFFERENT) else rng.randrange(len(lines))
    before, mark = lines[at].rsplit(" ", 1)
    return "\n".join(lines[:at] + [before + " "]), mark


def _spoiled(solution: str, rng: random.Random) -> str:
    """``solution`` with one step's result moved by a random offset (clipped at 0, so rarely unchanged).

    Read as a reference, a spoiled solution can only be reproduced by copying it, not by doing the arithmetic:
    without such examples the model learns to ignore a reference it can mostly recompute.
    """
    lines = solution.split("\n")
    step = rng.randrange(len(lines) - 1)  # the final "The answer is N." line has no "="
    left, result = lines[step].rsplit("= ", 1)
    wrong = int(result) + rng.choice([-1, 1]) * rng.randint(1, 10 ** len(result))
    lines[step] = f"{left}= {max(0, wrong)}"
    return "\n".join(lines)


# What decides the weights a run makes, besides its settings and its starting checkpoint: the task, the role
# formats and the training loop. Their hash is recorded next to the weights (RECORD_FILE), so a test can tell a
# shipped checkpoint made by an older version of them.
_RECIPE = (
    "stackrl.tasks.arithmetic:make_problem",
    "stackrl.tasks.arithmetic:make_dataset",
    "stackrl.tasks.arithmetic:split_of",
    "stackrl.tasks.arithmetic:REFERENCE_TEMPLATE",
    "stackrl.tasks.roles:JUDGE_TEMPLATE",
    "stackrl.tasks.roles:RETRY_TEMPLATE",
    "stackrl.tasks.roles:VERDICT_PREFIX",
    "stackrl.tasks.roles:slip",
    "stackrl.tasks.roles:judge_reply",
    "stackrl.tasks.roles:_steps",
    "stackrl.tasks.roles:_solution",
    "stackrl.tasks.roles:_SLIPS",
    "stackrl.tasks.pretrain:_example",
    "stackrl.tasks.pretrain:_solving_batches",
    "stackrl.tasks.pretrain:_reading_batches",
    "stackrl.tasks.pretrain:_skills_batches",
    "stackrl.tasks.pretrain:_SLIPPED",
    "stackrl.tasks.pretrain:_wrong_attempt",
    "stackrl.tasks.pretrain:_well_formed",
    "stackrl.tasks.roles:checked_retry_prompt",
    "stackrl.tasks.posing:request_text",
    "stackrl.tasks.pretrain:_misses",
    "stackrl.tasks.pretrain:generate",
    "stackrl.tasks.pretrain:_mark_cut",
    "stackrl.tasks.pretrain:_spoiled",
    "stackrl.tasks.pretrain:_fit",
    "stackrl.tasks.pretrain:pretrain",
)
RECORD_FILE = "stackrl_pretrain.json"


def recipe_hash(names: tuple[str, ...] | list[str] | None = None) -> str:
    """sha256 of the source (or value) of everything in ``names`` ("module:attribute"; default ``_RECIPE``, the
    recipe of arith-tiny and arith-skills)."""
    import hashlib
    import importlib
    import inspect

    digest = hashlib.sha256()
    for name in _RECIPE if names is None else names:
        module, attribute = name.split(":")
        value = getattr(importlib.import_module(module), attribute)
        digest.update(name.encode())
        digest.update((inspect.getsource(value) if callable(value) else repr(value)).encode())
    return digest.hexdigest()


def file_hash(path: str | Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _warmup_cosine(steps: int, warmup: int):
    """Linear warmup over ``warmup`` steps, then cosine decay to 10% at ``steps``: a factor of the learning rate."""
    return lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))))


def _fit(
    model, tokenizer, batches, *, steps, lr, schedule, test, save_every=0, snapshot=None, eval_every=0, per_example=False
) -> float:
    """``steps`` of AdamW on ``batches`` with the loss on the solution and eos only; returns the seconds it took.

    ``schedule(step)`` scales ``lr``; the gradient norm is clipped at 1. The loss is the mean over the batch's
    target tokens, or with ``per_example`` the mean over examples of each one's mean: then a one-word target (a
    mark) weighs as much as a whole judge reply instead of a hundredth of it.
    """
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    model.train()
    t_train = time.time()
    running = None
    for step in range(1, steps + 1):
        batch = next(batches)
        length = max(len(p) + len(c) for p, c in batch)
        ids = torch.full((len(batch), length), tokenizer.pad_token_id)
        labels = torch.full((len(batch), length), -100)
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for row, (p, c) in enumerate(batch):
            seq = p + c
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, len(p) : len(seq)] = torch.tensor(c)
            mask[row, : len(seq)] = 1
        if per_example:
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
            targets = labels[:, 1:]
            token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
            counted = targets != -100
            loss = ((token_loss * counted).sum(1) / counted.sum(1)).mean()
        else:
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % 100 == 0 or step == steps:
            print(f"step {step}  loss {running:.4f}  {time.time() - t_train:.0f}s", flush=True)
        if save_every and step % save_every == 0 and step < steps:
            snapshot(step)
        if eval_every and step % eval_every == 0 and step < steps:
            half = test.select(range(len(test) // 2))
            print(f"  greedy@{step}: {_fmt(evaluate(model, tokenizer, half))}", flush=True)
    return time.time() - t_train


def pretrain(
    out: str | Path,
    *,
    steps: int = 1000,
    batch_size: int = 64,
    lr: float = 3e-3,
    warmup: int = 50,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    train_size: int = 100_000,
    eval_per_category: int = 50,
    eval_every: int = 0,
    save_every: int = 0,
    reading_steps: int = 800,
    reading_fraction: float = 0.5,
    reading_spoiled: float = 1.0,
    reading_lr: float = 1e-3,
    compare_steps: int = 0,
    skills_steps: int = 0,
    skills_lr: float = 1e-3,
    skills_mix: str = "solve=1,read=0.5,judge=2,repair=1,redo=1,recheck=1,debate=1,pose=0.5,compare=1,mark=2",
    redo_problems: int = 0,
    init: str | Path | None = None,
    seed: int = 0,
    threads: int | None = None,
) -> dict:
    """Train the tokenizer and model, save the checkpoint in ``out``, and return the final evaluation.

    Three phases: ``steps`` of SFT on question -> solution, then ``reading_steps`` on a mix where a
    ``reading_fraction`` of the prompts carry a reference solution before the question, a ``reading_spoiled``
    share of those references with one wrong step, and the target is the reference itself, then the roles:
    ``compare_steps`` on check lines' marks alone and ``skills_steps`` on the roles mixed as ``skills_mix`` says
    (role=weight,...; the loss a mean over examples). ``init`` starts from a checkpoint and skips the first phase;
    a phase of 0 steps is skipped.
    """
    settings = {name: str(value) if isinstance(value, Path) else value for name, value in locals().items()}
    recipe = recipe_hash()  # now, while the source on disk is the code running
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.tasks.arithmetic import CATEGORIES, make_dataset
    from stackrl.tiny import tiny_model, train_tokenizer

    if threads:
        torch.set_num_threads(threads)
    random.seed(seed)
    torch.manual_seed(seed)
    t0 = time.time()
    test = make_dataset("test", eval_per_category * len(CATEGORIES), seed=seed)
    if init:
        tokenizer, model = AutoTokenizer.from_pretrained(init), AutoModelForCausalLM.from_pretrained(init)
    else:
        train = make_dataset("train", train_size, seed=seed, distinct=False)
        tokenizer = train_tokenizer(q + s for q, s in zip(train["question"][:20_000], train["solution"][:20_000]))
        model = tiny_model(tokenizer, hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"vocab {len(tokenizer)}  params {n_params:,}  data {time.time() - t0:.1f}s", flush=True)

    train_s = 0.0
    out = Path(out)

    def save(folder: Path, **record) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        record = {
            "settings": settings,
            "recipe_sha256": recipe,
            "init_sha256": file_hash(Path(init) / "model.safetensors") if init else None,
            **record,
        }
        (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")

    def snapshots(phase: str):
        return lambda step: save(Path(f"{out}-{phase}{step}"), snapshot={"phase": phase, "step": step})

    common = dict(test=test, save_every=save_every, eval_every=eval_every)
    if not init:
        batches = _solving_batches(tokenizer, train, random.Random(seed), batch_size)
        schedule = _warmup_cosine(steps, warmup)
        train_s += _fit(
            model, tokenizer, batches, steps=steps, lr=lr, schedule=schedule, snapshot=snapshots("solve"), **common
        )
    if reading_steps:
        # Fresh problems, drawn with replacement, at a constant rate: copying appears abruptly after a few hundred
        # steps, and the one run with warmup and cosine decay instead gave a model that doubted what it copied.
        reading = make_dataset("train", train_size, seed=seed + 1, distinct=False)
        rng = random.Random(seed)
        batches = _reading_batches(tokenizer, reading, rng, batch_size, reading_fraction, reading_spoiled)
        schedule = lambda s: 1.0  # noqa: E731
        train_s += _fit(
            model, tokenizer, batches, steps=reading_steps, lr=reading_lr, schedule=schedule,
            snapshot=snapshots("read"), **common,
        )
    skills = make_dataset("train", train_size, seed=seed + 2, distinct=False) if compare_steps or skills_steps else None
    misses = []
    if redo_problems:
        # The wrong attempts of the model the roles start from, on problems of their own draw: its mistakes, not
        # slips, are what a retry at evaluation follows.
        t_misses = time.time()
        misses = _misses(model, tokenizer, make_dataset("train", redo_problems, seed=seed + 4), seed)
        train_s += time.time() - t_misses
        print(f"{len(misses)} wrong attempts of {redo_problems}  {time.time() - t_misses:.0f}s", flush=True)
    if compare_steps:
        # Check lines' marks before whole replies: mixed in with them from the start, the marks kept to their prior
        # for 300 steps, while alone the comparison is learned in about 200. Alone, it also wiped out solving
        # (greedy pass@1 0.47 -> 0.00), hence the solving examples.
        batches = _skills_batches(tokenizer, skills, random.Random(seed + 3), batch_size, {"compare": 3.0, "solve": 1.0})
        schedule = lambda s: min(1.0, (s + 1) / warmup)  # noqa: E731
        train_s += _fit(
            model, tokenizer, batches, steps=compare_steps, lr=skills_lr, schedule=schedule,
            snapshot=snapshots("compare"), per_example=True, **common,
        )
    if skills_steps:
        mix = {role: float(weight) for role, weight in (part.split("=") for part in skills_mix.split(","))}
        batches = _skills_batches(tokenizer, skills, random.Random(seed + 2), batch_size, mix, misses)
        # A constant rate after warmup, so a snapshot at step k is the model of a run with skills_steps=k.
        schedule = lambda s: min(1.0, (s + 1) / warmup)  # noqa: E731
        train_s += _fit(
            model, tokenizer, batches, steps=skills_steps, lr=skills_lr, schedule=schedule,
            snapshot=snapshots("skills"), per_example=True, **common,
        )

    greedy = evaluate(model, tokenizer, test)
    sampled = evaluate(model, tokenizer, test, greedy=False, seed=seed)
    print(f"greedy:  {_fmt(greedy)}", flush=True)
    print(f"sampled: {_fmt(sampled)}", flush=True)

    summary = {"params": n_params, "train_seconds": round(train_s), "greedy": greedy, "sampled": sampled}
    if skills_steps:
        summary["skills"] = evaluate_skills(model, tokenizer, test, seed=seed)
    save(out, summary=summary)
    print(json.dumps(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="checkpoint folder to write")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--reading-steps", type=int, default=800)
    parser.add_argument("--reading-fraction", type=float, default=0.5)
    parser.add_argument("--reading-spoiled", type=float, default=1.0)
    parser.add_argument("--reading-lr", type=float, default=1e-3)
    parser.add_argument("--compare-steps", type=int, default=0)
    parser.add_argument("--skills-steps", type=int, default=0)
    parser.add_argument("--skills-lr", type=float, default=1e-3)
    parser.add_argument("--skills-mix", default="solve=1,read=0.5,judge=2,repair=1,redo=1,recheck=1,debate=1,pose=0.5,compare=1,mark=2")
    parser.add_argument(
        "--redo-problems", type=int, default=0, help="train problems whose wrong attempts make the redo role"
    )
    parser.add_argument("--init", default=None, help="start from this checkpoint and skip the first phase")
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--save-every", type=int, default=0, help="also save snapshots in OUT-<phase><step>")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    pretrain(
        args.out,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        hidden_size=args.hidden_size,
        num_layers=args.num_layers,
        reading_steps=args.reading_steps,
        reading_fraction=args.reading_fraction,
        reading_spoiled=args.reading_spoiled,
        reading_lr=args.reading_lr,
        compare_steps=args.compare_steps,
        skills_steps=args.skills_steps,
        skills_lr=args.skills_lr,
        skills_mix=args.skills_mix,
        redo_problems=args.redo_problems,
        init=args.init,
        eval_every=args.eval_every,
        save_every=args.save_every,
        seed=args.seed,
        threads=args.threads,
    )


if __name__ == "__main__":
    main()
