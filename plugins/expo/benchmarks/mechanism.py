"""What the built-in model's self-explanations are worth: on held-out hard problems its own samples all fail, the
policy is shown the true answer (and, in the CPU recipe's conditioning, the last step too) and writes the way
there.

For each conditioning: the share of explanations that reach the given answer; the share whose every line holds
(each step's arithmetic, and the answer line stating the last result: stackrl_rrpo's oracle, first_wrong_line);
the share of the reaching ones that are also valid; and the mean per-token log-likelihood, after the bare question,
of the reaching explanations against the dataset's own solutions of the same problems (the paper's first property:
a good positive is likely under the policy). The policy's own samples are the first row, for comparison.
With --train-steps, it also trains the CPU recipe and the same recipe without expo (plain GRPO) for that many
steps per seed and prints the greedy held-out accuracy after each.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/expo/benchmarks/mechanism.py --problems 200
    OMP_NUM_THREADS=1 .venv/bin/python plugins/expo/benchmarks/mechanism.py --problems 0 --train-steps 30 --seeds 2
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from stackrl.blocks.roles import split_steps
from stackrl.config import load_config
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.heldout import against_grpo
from stackrl_expo import explanation_prompts
from stackrl_rrpo.resets import first_wrong_line

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "expo-cpu.yaml"
CONDITIONINGS = {
    "answer line only": "The answer is {answer}.\n\n{prompt}",
    "last step + answer (the CPU recipe's)": "{last_step}\nThe answer is {answer}.\n\n{prompt}",
}
HARD = ["3 steps, 2-digit", "4 steps, 2-digit"]


def valid(text: str) -> bool:
    lines = [line.strip() for line in split_steps(text) if line.strip()]
    return bool(lines) and first_wrong_line(lines) is None


def mean_token_logprob(trainer, prompts: list, texts: list[str]) -> float:
    """The mean per-token log-prob of each text after its prompt, averaged over texts."""
    tokens = [trainer.processing_class(t, add_special_tokens=False)["input_ids"] for t in texts]
    scores = trainer._shared_policy.score(prompts, tokens)
    return ((scores.logprobs * scores.mask).sum(1) / scores.mask.sum(1)).mean().item()


def shares(trainer, rows, texts: list[str]) -> dict[str, float]:
    reaching = [exact_match(t, a) >= 1.0 for t, a in zip(texts, rows["answer"])]
    holds = [valid(t) for t in texts]
    kept = [i for i, r in enumerate(reaching) if r]
    out = {
        "reaching": sum(reaching) / len(texts),
        "valid": sum(holds) / len(texts),
        "valid_if_reaching": sum(holds[i] for i in kept) / max(1, len(kept)),
        "logprob": float("nan"),
        "solution_logprob": float("nan"),
    }
    if kept:
        questions = [rows["question"][i] for i in kept]
        out["logprob"] = mean_token_logprob(trainer, questions, [texts[i] for i in kept])
        out["solution_logprob"] = mean_token_logprob(trainer, questions, [rows["solution"][i] for i in kept])
    return out


def failed_problems(policy, size: int, seed: int, samples: int = 4):
    """Held-out hard problems none of whose ``samples`` own completions is correct (the groups ExPO explains)."""
    rows = make_dataset(split="test", size=size, seed=seed, categories=HARD)
    torch.manual_seed(seed)
    own = policy.generate([q for q in rows["question"] for _ in range(samples)], do_sample=True, temperature=1.0)
    keep = [i for i in range(len(rows))
            if not any(exact_match(own[i * samples + j].text, rows["answer"][i]) for j in range(samples))]
    return rows.select(keep), [own[i * samples].text for i in keep]


def run(problems: int, seed: int = 0) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as out:
        trainer = build_trainer(load_config([RECIPE], [f"output_dir={out}"]))
    policy = trainer._shared_policy
    rows, own = failed_problems(policy, problems, seed)
    results = {"own samples (all wrong)": shares(trainer, rows, own)}
    columns = {name: list(rows[name]) for name in ("answer", "solution")}
    for name, template in CONDITIONINGS.items():
        prompts = explanation_prompts(list(rows["question"]), columns, list(range(len(rows))), template, where=name)
        torch.manual_seed(seed)
        results[name] = shares(trainer, rows, [g.text for g in policy.generate(prompts, do_sample=True)])
    results["problems"] = {"failed": float(len(rows))}
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=200, help="held-out hard problems drawn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-steps", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="training runs, seeds from --seed on")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for seed in range(args.seed, args.seed + args.seeds if args.train_steps else args.seed):
        accuracy = against_grpo(RECIPE, ["trainer.disable_tqdm=true"], steps=args.train_steps, heldout=128, seed=seed)
        print(f"seed {seed}: greedy held-out accuracy after {args.train_steps} steps: expo {accuracy['method']:.3f}"
              f"   grpo {accuracy['grpo']:.3f}", flush=True)
    if not args.problems:
        return
    results = run(args.problems, args.seed)
    print(f"failed problems: {int(results.pop('problems')['failed'])} of {args.problems}")
    for name, r in results.items():
        print(f"{name}: reaching {r['reaching']:.3f}   all lines valid {r['valid']:.3f}   valid among reaching "
              f"{r['valid_if_reaching']:.3f}   log-prob/token {r['logprob']:.3f} (dataset solution "
              f"{r['solution_logprob']:.3f})")


if __name__ == "__main__":
    main()
