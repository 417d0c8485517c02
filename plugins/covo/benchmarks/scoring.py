"""Time of CoVo's reward on one realistic batch: every probe scored alone vs one forward per trajectory.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/covo/benchmarks/scoring.py [--prompts 8] [--samples 16]

Samples a batch with stackrl/arith-tiny (mid-difficulty problems, temperature 1, up to 64 new tokens), then
computes the reward on that same batch with ``scoring: per_probe`` (what the authors' scoring pass does: one
prefix per probe) and ``scoring: shared_prefix`` (``ctx.score_probes``), checks they agree, and prints the times.
The last line is ``covo_speedup: X`` (per-probe time / shared-prefix time, best of ``--repeats``).
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

from stackrl.run import build_trainer  # noqa: E402
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset  # noqa: E402


def best_time(trainer, rollout, repeats: int, **settings) -> tuple[float, torch.Tensor, dict]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        rewards, logs = covo_reward(trainer, rollout, **settings)
        times.append(time.perf_counter() - start)
    return min(times), rewards, logs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="rows per forward in both paths")
    args = parser.parse_args()
    torch.set_num_threads(1)
    trainer = build_trainer(recipe(Path(tempfile.mkdtemp())))
    questions = make_dataset(split="train", size=args.prompts, seed=11, categories=CATEGORIES[1:4])["question"]
    rollout = sampled_rollout(trainer, questions, args.samples, max_new_tokens=64)
    settings = {"reward_mode": "continuous", "curiosity": "log", "batch_size": args.batch_size}
    naive, naive_rewards, logs = best_time(trainer, rollout, args.repeats, scoring="per_probe", **settings)
    shared, shared_rewards, _ = best_time(trainer, rollout, args.repeats, scoring="shared_prefix", **settings)
    assert torch.allclose(naive_rewards, shared_rewards, atol=1e-5), "the two scoring paths disagree"
    lengths = [len(ids) for ids in rollout.completion_ids]
    print(f"batch: {args.prompts} prompts x {args.samples} samples, completions {min(lengths)}-{max(lengths)} tokens")
    print(f"distinct answers per group: {logs['covo/distinct_answers']:.2f}")
    print(f"per-probe scoring:     {naive:.2f} s")
    print(f"shared-prefix scoring: {shared:.2f} s")
    print(f"covo_speedup: {naive / shared:.2f}")


if __name__ == "__main__":
    main()
