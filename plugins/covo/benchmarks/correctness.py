"""Does CoVo's label-free reward agree with correctness on arith-tiny? Mean reward of correct vs wrong answers.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/covo/benchmarks/correctness.py [--seeds 3]

For each seed: 16 mid-difficulty problems x 8 samples from stackrl/arith-tiny at temperature 1, the CoVo reward
(binary RiV, and the continuous RiV), and exact-match correctness, which CoVo never sees. Prints the mean reward of
correct and of wrong completions per seed and over all, and the mean number of steps of each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import covo_reward, recipe, sampled_rollout  # noqa: E402

from stackrl.rewards import exact_match  # noqa: E402
from stackrl.run import build_trainer  # noqa: E402
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    trainer = build_trainer(recipe(Path(tempfile.mkdtemp())))
    totals = {mode: {True: [], False: []} for mode in ("binary", "continuous")}
    steps = {True: [], False: []}
    for seed in range(args.seeds):
        rows = make_dataset(split="train", size=16, seed=100 + seed, categories=CATEGORIES[1:4])
        rollout = sampled_rollout(trainer, rows["question"], group_size=8, seed=seed)
        answers = [a for a in rows["answer"] for _ in range(8)]
        correct = [bool(exact_match(c, a)) for c, a in zip(rollout.completions, answers)]
        for c, text in zip(correct, rollout.completions):
            steps[c].append(len([line for line in text.split("\n") if line.strip()]))
        for mode in totals:
            rewards, _ = covo_reward(trainer, rollout, reward_mode=mode, curiosity="off")
            for c, r in zip(correct, rewards.tolist()):
                totals[mode][c].append(r)
            right = [r for c, r in zip(correct, rewards.tolist()) if c]
            wrong = [r for c, r in zip(correct, rewards.tolist()) if not c]
            print(f"seed {seed} {mode:10s} accuracy {sum(correct) / len(correct):.2f}  "
                  f"reward correct {sum(right) / len(right):.3f}  wrong {sum(wrong) / len(wrong):.3f}")
    for mode, by in totals.items():
        print(f"all {mode:10s} reward correct {sum(by[True]) / len(by[True]):.3f} (n={len(by[True])})  "
              f"wrong {sum(by[False]) / len(by[False]):.3f} (n={len(by[False])})")
    print(f"steps per completion: correct {sum(steps[True]) / len(steps[True]):.2f}  "
          f"wrong {sum(steps[False]) / len(steps[False]):.2f}")


if __name__ == "__main__":
    main()
