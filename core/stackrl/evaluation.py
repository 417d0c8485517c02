"""Held-out accuracy: pass@1 and majority@k of a model on a config's task, sampled with a fixed seed."""

from __future__ import annotations

import math
from collections import Counter

import torch
from accelerate.utils import gather_object
from tqdm.auto import tqdm

from stackrl.config import EvalSection, LoadedConfig
from stackrl.data import load_prompts
from stackrl.rewards import OUTCOME_REWARDS, extract_answer
from stackrl.tasks.roles import judge_prompt, parse_verdict


def _prompt_texts(tokenizer, prompts: list) -> list[str]:
    if isinstance(prompts[0], str):
        return prompts
    return [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]


def verification_weighted_vote(answers: list, verdicts: list) -> str | None:
    """The final answer most of the samples judged correct agree on; with none judged correct, the plain majority.

    ``answers`` are the samples' final answers (``None``: none), ``verdicts`` a judge's verdict on each (True
    correct, False wrong, None none). Ties go to the answer seen first; ``None`` when no sample has an answer.
    """
    accepted = [a for a, verdict in zip(answers, verdicts, strict=True) if a is not None and verdict is True]
    pool = accepted or [a for a in answers if a is not None]
    if not pool:
        return None
    votes = Counter(pool)
    return max(votes, key=lambda a: (votes[a], -pool.index(a)))


def _vote_correct(texts: list[str], answer: str, check, verdicts: list | None = None) -> float:
    """Correctness of the voted final answer among ``texts``: the plain majority, or weighted by ``verdicts``."""
    answers = [extract_answer(t) for t in texts]
    top = verification_weighted_vote(answers, verdicts or [None] * len(texts))
    return 0.0 if top is None else check(texts[answers.index(top)], answer)


def _my_batches(starts: list[int], accelerator) -> list[int]:
    """This process's batches, round-robin; every process gets as many (the last repeated) so all run the same
    number of ``generate`` calls, as ZeRO-3 and FSDP need when their forwards are collective."""
    if accelerator is None or accelerator.num_processes == 1:
        return starts
    world = accelerator.num_processes
    padded = starts + starts[-1:] * (math.ceil(len(starts) / world) * world - len(starts))
    return padded[accelerator.process_index :: world]


def _unpack_cpu_4bit_weights(model) -> None:
    """Give 4-bit layers back the weight layout training needs.

    On a CPU with AVX512-BF16, bitsandbytes repacks a 4-bit layer's weights in place for fast inference the first
    time it runs in eval mode without gradient, and only undoes it when the layer is saved; training on the
    repacked weights then fails. Evaluating in the middle of a run must leave the model as it found it.
    """
    for module in model.modules():
        weight = getattr(module, "weight", None)
        state = getattr(weight, "quant_state", None)
        if getattr(state, "packing_format_for_cpu", False):
            from bitsandbytes.functional import _convert_weight_packed_for_cpu_inverse

            weight.data, weight.quant_state = _convert_weight_packed_for_cpu_inverse(weight.data, state)


def _completions(
    model, tokenizer, prompts: list[str], section: EvalSection, k: int, max_new_tokens: int, accelerator, seed: int
) -> list[list[str]]:
    """``k`` completions of each prompt, sampled as ``section`` says. Each batch is sampled with ``seed`` + its
    first prompt's index; with several processes each generates a share of the batches and all return every
    prompt's completions."""
    device = next(model.parameters()).device
    results = {}  # prompt index -> its completions
    starts = _my_batches(list(range(0, len(prompts), section.batch_size)), accelerator)
    greedy = section.temperature == 0
    # fork_rng: the training run's random streams (CPU and this GPU) are left as they were.
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for start in tqdm(starts, desc="evaluating", leave=False):
            torch.manual_seed(seed + start)
            batch = tokenizer(
                prompts[start : start + section.batch_size],
                return_tensors="pt",
                padding=True,
                padding_side="left",
                add_special_tokens=False,
            ).to(device)
            sampled = model.generate(
                **batch,
                do_sample=not greedy,
                temperature=None if greedy else section.temperature,
                top_p=1.0,
                top_k=0,
                num_return_sequences=1 if greedy else k,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
            texts = tokenizer.batch_decode(sampled[:, batch["input_ids"].size(1) :], skip_special_tokens=True)
            if greedy:  # every one of the k samples is the greedy completion
                texts = [t for t in texts for _ in range(k)]
            for i in range(len(texts) // k):
                results[start + i] = texts[i * k : (i + 1) * k]
    if accelerator is not None and accelerator.num_processes > 1:
        results = dict(gather_object(list(results.items())))
    return [results[i] for i in range(len(prompts))]


def _solve_figures(
    completions: list[list[str]], answers: list[str], categories: list | None, check, k: int, verdicts=None
) -> dict:
    pass1 = [sum(check(t, answer) for t in texts) / k for texts, answer in zip(completions, answers)]
    majority = [_vote_correct(texts, answer, check) for texts, answer in zip(completions, answers)]
    by_category = {}
    for correct, category in zip(pass1, categories or []):
        by_category.setdefault(category, []).append(correct)
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    figures = {"pass@1": mean(pass1), f"maj@{k}": mean(majority)}
    if k > 1:  # the share of problems some sample solves
        figures[f"pass@{k}"] = mean([float(p > 0) for p in pass1])
    if verdicts is not None:
        verified = [_vote_correct(*row, check, judged) for row, judged in zip(zip(completions, answers), verdicts)]
        figures[f"vmaj@{k}"] = mean(verified)
    return {**figures, "problems": len(pass1), "by_category": {name: mean(v) for name, v in by_category.items()}}


@torch.no_grad()
def evaluate(model, tokenizer, config: LoadedConfig, max_new_tokens: int, accelerator=None) -> dict:
    """Held-out figures of ``eval.skill`` on ``eval.size`` problems of the ``eval.split`` split.

    solve: pass@1 (the mean correctness of ``eval.samples`` completions per problem), majority@k, pass@k (some
    sample right; when k > 1) and pass@1 per category. judge, repair, recheck, debate, pose, corrupt, transition and
    decompose (one reply per prompt): the figures of :mod:`stackrl.tasks.skills`; pose shows the problems four to a
    request. The same model and config give the same figures.

    With an ``accelerator`` over several processes, every process must call this: each evaluates a share of the
    batches and all return the figures for the whole split, the same as one process computes.
    """
    from stackrl.tasks import skills

    section: EvalSection = config.host.eval
    data = config.host.data
    dataset = load_prompts(data, split=section.split, size=section.size, keep_answer=True)
    check = OUTCOME_REWARDS[section.metric]
    prompts = _prompt_texts(tokenizer, list(dataset["prompt"])) if len(dataset) else []
    answers = list(dataset[data.answer_column])
    categories = list(dataset["category"]) if "category" in dataset.column_names else None

    def generate(texts: list[str], k: int, seed: int = section.seed) -> list[list[str]]:
        return _completions(model, tokenizer, texts, section, k, max_new_tokens, accelerator, seed)

    was_training = model.training
    model.eval()
    try:
        def reply(texts: list[str], seed: int = section.seed) -> list[str]:
            return [completions[0] for completions in generate(texts, 1, seed)]

        def right(texts: list[str]) -> list[float]:
            return [check(t, answer) for t, answer in zip(texts, answers)]

        if section.skill == "judge":
            replies = reply(skills.judge_prompts(prompts, list(dataset["solution"]), section.seed))
            return {"skill": "judge", **skills.judge_figures(replies, categories)}
        if section.skill in ("repair", "recheck"):
            attempts = reply(prompts)
            if section.skill == "repair":
                retried = skills.repair_prompts(prompts, attempts)
            else:
                checks = reply([judge_prompt(p, a) for p, a in zip(prompts, attempts)])
                retried = skills.recheck_prompts(prompts, attempts, checks)
            # Seeded apart from the first attempts: the same draws would favour repeating them.
            retries = reply(retried, section.seed + 1)
            return {"skill": section.skill, **skills.repair_figures(right(attempts), right(retries), categories)}
        if section.skill == "debate":
            attempts, others = reply(prompts), reply(prompts, section.seed + 2)
            replies = reply(skills.debate_prompts(prompts, attempts, others), section.seed + 3)
            return {"skill": "debate", **skills.debate_figures(right(attempts), right(others), right(replies))}
        if section.skill == "pose":
            requests, shown = skills.pose_requests(prompts)
            return {"skill": "pose", **skills.pose_figures(reply(requests), shown)}
        if section.skill in skills.ROLE_SKILLS:
            figures = skills.measure_role(
                section.skill, prompts, list(dataset["solution"]), right,
                lambda texts, offset: reply(texts, section.seed + offset), categories=categories,
            )
            return {"skill": section.skill, **figures}
        k = section.samples
        completions = generate(prompts, k)
        verdicts = None
        if section.verify_vote:  # the model judges each of its samples; its verdicts weigh the vote
            judged = [judge_prompt(p, t) for p, texts in zip(prompts, completions) for t in texts]
            flat = [parse_verdict(r[0]) for r in generate(judged, 1, section.seed + 2)]
            verdicts = [flat[i * k : (i + 1) * k] for i in range(len(prompts))]
        return _solve_figures(completions, answers, categories, check, k, verdicts)
    finally:
        model.train(was_training)
        _unpack_cpu_4bit_weights(model)
