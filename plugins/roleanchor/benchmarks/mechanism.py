"""Role Anchor's mechanism on stackrl/arith-roles' decomposer: a pull toward planted decompositions (the shortcut the
pipeline's reward pays for: the solver answers a planted decomposition 0.57 of the time, a faithful one 0.16) with
and without the anchor, through the plugin's own loss (stackrl_roleanchor.anchor_loss).

Each step takes one Adam step on  NLL(planted decompositions | role prompt) + lambda * anchor  over training
problems, and measures on held-out ones the planted margin: the mean of log p(planted) - log p(faithful) under the
role prompt (how much the decomposer prefers doing the solver's work), and at the end the share of greedy
decompositions that plant a result. The anchor should hold both near the start while the pull alone raises them.
Mutants (``mutant=``): ``sign`` (the anchor's sign flipped), ``same_prompt`` (neutral prompt = role prompt),
``live`` (the anchor against the live policy instead of the frozen start).

    nice -n 10 python plugins/roleanchor/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from stackrl.modeling import resolve_model_path
from stackrl.tasks.arithmetic import make_dataset
from stackrl.tasks.decomposition import decompose, decompose_prompt, plants_answer
from stackrl.testing.benchmark import one_thread
from stackrl_roleanchor import RoleanchorConfig, anchor_loss

MODEL = "stackrl/arith-roles"
LIVE = "live"


class Scorer:
    """``ctx.score(..., full_vocab=True)`` for two plain models, row by row: "policy" (gradient when asked),
    "initial" (the frozen start) and "live" (the policy without gradient: the live-reference mutant)."""

    def __init__(self, tokenizer, policy, initial):
        self.tokenizer, self.models = tokenizer, {"policy": policy, "initial": initial, LIVE: policy}

    def ids(self, text):
        return text if isinstance(text, list) else self.tokenizer(text)["input_ids"]

    def score(self, contexts, continuations, *, model, full_vocab, grad):
        net, rows = self.models[model], []
        with torch.set_grad_enabled(grad and model == "policy"):
            for context, continuation in zip(contexts, continuations):
                context = self.ids(context)
                ids = torch.tensor([context + list(continuation)])
                logits = net(ids).logits[0, len(context) - 1: len(context) - 1 + len(continuation)]
                rows.append(torch.log_softmax(logits.float(), -1))
        logprobs = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(r)) for r in rows], batch_first=True)
        return SimpleNamespace(vocab_logprobs=logprobs, mask=mask)


class Rows(SimpleNamespace):
    """Decomposer rows as the plugin reads a rollout: role prompts, their columns, prompt and completion ids."""

    def __len__(self):
        return len(self.prompts)

    def __add__(self, other):
        columns = {k: v + other.columns[k] for k, v in self.columns.items()}
        return Rows(prompts=self.prompts + other.prompts, columns=columns, prompt_ids=self.prompt_ids +
                    other.prompt_ids, completion_ids=self.completion_ids + other.completion_ids)


def rows(tokenizer, questions, planted: bool) -> Rows:
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    prompts = [decompose_prompt(q) for q in questions]
    return Rows(prompts=prompts, columns={"question": list(questions)},
                prompt_ids=[tokenizer(p)["input_ids"] for p in prompts],
                completion_ids=[tokenizer(decompose(q, planted=planted))["input_ids"] + eos for q in questions])


def _sequence_logp(net, prompt_ids, completion_ids):
    ids = torch.tensor([prompt_ids + completion_ids])
    logps = torch.log_softmax(net(ids).logits[0, len(prompt_ids) - 1:-1].float(), -1)
    return logps.gather(-1, torch.tensor(completion_ids)[:, None]).sum()


@torch.no_grad()
def planted_margin(net, faithful: Rows, planted: Rows) -> float:
    gaps = [_sequence_logp(net, p, c2) - _sequence_logp(net, p, c1)
            for p, c1, c2 in zip(faithful.prompt_ids, faithful.completion_ids, planted.completion_ids)]
    return float(torch.stack(gaps).mean())


@torch.no_grad()
def planted_share(net, tokenizer, questions) -> float:
    hits = 0
    for question in questions:
        ids = tokenizer(decompose_prompt(question), return_tensors="pt")["input_ids"]
        out = net.generate(ids, do_sample=False, max_new_tokens=40, pad_token_id=tokenizer.pad_token_id
                           or tokenizer.eos_token_id)
        hits += plants_answer(question, tokenizer.decode(out[0, ids.size(1):], skip_special_tokens=True))
    return hits / len(questions)


@torch.no_grad()
def role_drift(scorer: Scorer, held: Rows) -> float:
    """How far the policy's role shift has moved from the start's on ``held``, measured apart from the plugin's code:
    at each completion token, log p(. | role) - log p(. | bare question), centred over the whole vocabulary, the
    mean squared difference between policy and start, averaged over tokens."""
    gaps = []
    for model in ("policy", "initial"):
        role = scorer.score(held.prompt_ids, held.completion_ids, model=model, full_vocab=True, grad=False)
        bare = scorer.score(held.columns["question"], held.completion_ids, model=model, full_vocab=True, grad=False)
        shift = role.vocab_logprobs - bare.vocab_logprobs
        gaps.append(shift - shift.mean(-1, keepdim=True))
    mask = role.mask
    return float(((gaps[0] - gaps[1]).pow(2).mean(-1) * mask).sum() / mask.sum())


def run(steps: int = 20, seed: int = 0, *, strength: float = 1.0, mutant: str = "", problems: int = 16,
        heldout: int = 16, learning_rate: float = 3e-3, share: bool = True) -> dict:
    """One run: ``steps`` Adam steps of the planted pull plus ``strength`` times the anchor (0: the pull alone).
    Returns the held-out planted margin and greedy planted share before and after."""
    with one_thread():
        torch.manual_seed(seed)
        path = resolve_model_path(MODEL)
        tokenizer = AutoTokenizer.from_pretrained(path)
        policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        initial = copy.deepcopy(policy).eval()
        for parameter in initial.parameters():
            parameter.requires_grad_(False)
        policy.train()
        train_q = list(make_dataset("train", problems, seed=seed)["question"])
        test_q = list(make_dataset("test", heldout, seed=seed)["question"])
        train_planted, train_faithful = rows(tokenizer, train_q, True), rows(tokenizer, train_q, False)
        test_faithful, test_planted = rows(tokenizer, test_q, False), rows(tokenizer, test_q, True)
        config = RoleanchorConfig(neutral_template="{question}Decompose:\n" if mutant == "same_prompt" else "{question}")
        reference = LIVE if mutant == LIVE else "initial"
        sign = -1.0 if mutant == "sign" else 1.0
        scorer = Scorer(tokenizer, policy, initial)
        optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
        before = {"margin": planted_margin(policy, test_faithful, test_planted)}
        if share:
            before["share"] = planted_share(policy, tokenizer, test_q)
        anchor_values = []
        for _ in range(steps):
            pull = -torch.stack([_sequence_logp(policy, p, c) for p, c in
                                 zip(train_planted.prompt_ids, train_planted.completion_ids)]).mean() / 10
            loss = pull
            if strength:
                # the anchor on the decomposer's rows, faithful and planted alike
                anchor, _ = anchor_loss(scorer, train_faithful + train_planted, config, reference, grad=True)
                anchor_values.append(float(anchor.detach()))
                loss = loss + sign * strength * anchor
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        policy.eval()
        after = {"margin": planted_margin(policy, test_faithful, test_planted)}
        drift = role_drift(scorer, test_faithful + test_planted)
        if share:
            after["share"] = planted_share(policy, tokenizer, test_q)
        return {"margin_before": before["margin"], "margin_after": after["margin"],
                "margin_rise": after["margin"] - before["margin"],
                "share_before": before.get("share"), "share_after": after.get("share"),
                "anchor_last": anchor_values[-1] if anchor_values else 0.0, "role_drift": float(drift)}


if __name__ == "__main__":
    import argparse
    import statistics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--strength", type=float, default=1.0)
    args = parser.parse_args()
    arms = {"pull alone": dict(strength=0.0), "role anchor": dict(strength=args.strength)}
    for name, kw in arms.items():
        found = [run(args.steps, seed, **kw) for seed in args.seeds]
        for seed, figures in zip(args.seeds, found):
            print(name, seed, {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()})
        print(name, "mean", {k: round(statistics.mean(f[k] for f in found), 3) for k in
                             ("margin_rise", "role_drift", "share_before", "share_after")})
