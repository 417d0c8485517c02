"""Time of CoVo's reward on one realistic batch: every probe scored alone vs one forward per trajectory.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/covo/benchmarks/scoring.py [--prompts 8] [--samples 16]

Samples a batch with stackrl/arith-tiny (mid-difficulty problems, temperature 1, up to 64 new tokens), then
computes the reward on that same batch with ``scoring: per_probe`` (what the authors' scoring pass does: one
prefix per probe) and ``scoring: shared_prefix`` (``ctx.score_probes``), checks they agree, and prints the times.

The least this scoring can cost is one no-grad forward over the tokens a log-prob is read after, each distinct
prefix once: each distinct prompt once (a group's samples share theirs), every trajectory token and every probe
token but a probe's last (a target only), probes that share a prefix (such as the answer template) reading it once.
The benchmark times that forward on exactly those tokens packed end to end, as many rows as there are trajectories
and no padding, and prints ``covo_limit_ratio: X`` (shared-prefix reward time / that forward) and, last,
``covo_speedup: X`` (per-probe time / shared-prefix time). For comparison it also times the forward over every
trajectory's own prompt, its tokens and all its distinct probe tokens, the last ones too. Every time is the best of
``--repeats``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import covo_reward, recipe, sampled_rollout  # noqa: E402

from stackrl.probes import _build, _Tree  # noqa: E402  (the prefix trees score_probes lays out)
from stackrl.run import build_trainer  # noqa: E402
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset  # noqa: E402


def best_time(trainer, rollout, repeats: int, **settings) -> tuple[float, torch.Tensor, dict]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        rewards, logs = covo_reward(trainer, rollout, **settings)
        times.append(time.perf_counter() - start)
    return min(times), rewards, logs


def probed_tokens(trainer, rollout, **settings) -> tuple[list[list[int]], list[list[int]]]:
    """CoVo's probes as token streams, each distinct prefix of a trajectory once: what shared-prefix scoring reads
    (each distinct prompt once, then per trajectory the tree ``score_probes`` lays out, less its root, the prompt's
    last token); and per trajectory its prompt, its tokens and every token of its probes."""
    policy, calls = trainer._shared_policy, []
    score_probes = policy.score_probes
    policy.score_probes = lambda *args, **options: calls.append(args) or score_probes(*args, **options)
    try:
        covo_reward(trainer, rollout, **settings)
    finally:
        del policy.score_probes
    (contexts, trajectories, probes), = calls
    contexts = policy._token_ids(contexts)
    read = [list(prompt) for prompt in dict.fromkeys(map(tuple, contexts))]
    every = []
    for context, trajectory, branches in zip(contexts, trajectories, probes):
        read.append(_build(context, trajectory, branches)[0].tokens[1:])
        tree = _Tree([*context, *trajectory])
        for branch, ids in branches:
            node = len(context) + branch - 1
            for token in ids:
                node = tree.child(node, token)
        every.append(tree.tokens)
    return read, every


def packed_forward_time(trainer, streams: list[list[int]], rows: int, repeats: int) -> tuple[float, int]:
    """The time of one no-grad forward over all of ``streams`` packed end to end into ``rows`` equal rows."""
    flat = torch.tensor([token for stream in streams for token in stream])
    width = -(-len(flat) // rows)
    ids = torch.nn.functional.pad(flat, (0, width * rows - len(flat))).view(rows, width)
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            trainer.model(input_ids=ids)
            times.append(time.perf_counter() - start)
    return min(times), len(flat)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="rows per forward in both paths")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    trainer = build_trainer(recipe(Path(tempfile.mkdtemp())))
    questions = make_dataset(split="train", size=args.prompts, seed=11, categories=CATEGORIES[1:4])["question"]
    rollout = sampled_rollout(trainer, questions, args.samples, max_new_tokens=64)
    settings = {"reward_mode": "continuous", "curiosity": "log", "batch_size": args.batch_size}
    naive, naive_rewards, logs = best_time(trainer, rollout, args.repeats, scoring="per_probe", **settings)
    shared, shared_rewards, _ = best_time(trainer, rollout, args.repeats, scoring="shared_prefix", **settings)
    assert torch.allclose(naive_rewards, shared_rewards, atol=1e-5), "the two scoring paths disagree"
    read, every = probed_tokens(trainer, rollout, scoring="shared_prefix", **settings)
    limit, tokens = packed_forward_time(trainer, read, len(every), args.repeats)
    full, full_tokens = packed_forward_time(trainer, every, len(every), args.repeats)
    lengths = [len(ids) for ids in rollout.completion_ids]
    print(f"batch: {args.prompts} prompts x {args.samples} samples, completions {min(lengths)}-{max(lengths)} tokens")
    print(f"distinct answers per group: {logs['covo/distinct_answers']:.2f}")
    print(f"per-probe scoring:     {naive:.2f} s")
    print(f"shared-prefix scoring: {shared:.2f} s")
    print(f"one packed forward over every trajectory's prompt, its tokens and its probes', {full_tokens} tokens: "
          f"{full:.2f} s (per-probe {naive / full:.2f} times that, shared-prefix {shared / full:.2f})")
    print(f"one packed forward over the {tokens} tokens a log-prob is read after, each prompt once: {limit:.2f} s")
    print(f"covo_limit_ratio: {shared / limit:.2f}")
    print(f"covo_speedup: {naive / shared:.2f}")


if __name__ == "__main__":
    main()
