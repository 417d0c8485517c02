"""The judging plugins' mechanism on the built-in judging model (selfjudge, sirlc, ssr share the judges block):

1. Judge accuracy: the model solves training questions (8 samples each), the plugin of its CPU recipe judges the
   solutions, and the judgements are compared with the hidden answers: accuracy of the verdict (>= 0.5 read as
   "correct"), its rates on right and wrong solutions, the AUROC, the share of malformed judgements.
2. Label-free training with the plugin's CPU recipe: held-out pass@1 before and after, and the reward-truth
   agreement the host logged over training. Several seeds.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/selfjudge/benchmarks/mechanism.py selfjudge --seeds 2 --steps 20
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from stackrl import RewardContext, Rollout
from stackrl.config import load_config
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.measure import label_free_run
from stackrl.truth import auroc

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"


def judge_accuracy(plugin: str, questions: int, group_size: int = 8, seed: int = 0, overrides=()) -> dict[str, float]:
    """The CPU recipe's model solves ``questions`` training questions and judges its solutions through ``plugin``."""
    config = load_config([RECIPES / f"{plugin}-cpu.yaml"], [*overrides, f"output_dir={tempfile.mkdtemp()}"])
    trainer = build_trainer(config)
    rows = make_dataset(split="train", size=questions, seed=seed, **config.host.data.options)
    prompts = [q for q in rows["question"] for _ in range(group_size)]
    torch.manual_seed(seed)
    generations = trainer._shared_policy.generate(prompts, temperature=1.0)
    rollout = Rollout(
        prompts=prompts,
        completions=[g.text for g in generations],
        prompt_ids=[g.prompt_ids for g in generations],
        completion_ids=[g.completion_ids for g in generations],
        columns={},
        group_size=group_size,
    )
    logs = {}
    ctx = RewardContext(step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                        _log=logs.__setitem__, _plugin=plugin, rollout=rollout)
    judged = trainer.plugins.plugins[plugin].reward(ctx)
    answers = [a for a in rows["answer"] for _ in range(group_size)]
    correct = torch.tensor([exact_match(t, a) == 1.0 for t, a in zip(rollout.completions, answers)])
    values = torch.tensor([float("nan") if j is None else j for j in judged])
    scored = ~torch.isnan(values)
    says_correct = values[scored] >= 0.5
    right = correct[scored]
    return {
        "solved": correct.double().mean().item(),
        "judge_accuracy": (says_correct == right).double().mean().item(),
        "true_positive_rate": says_correct[right].double().mean().item(),
        "true_negative_rate": (~says_correct[~right]).double().mean().item(),
        "auroc": auroc(values, correct),
        "malformed": logs[f"{plugin}/judge_malformed"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plugin", choices=["selfjudge", "sirlc", "ssr"])
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--eval-size", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for key, value in judge_accuracy(args.plugin, args.questions).items():
        print(f"{args.plugin} {key}: {value:.3f}", flush=True)
    recipe = RECIPES / f"{args.plugin}-cpu.yaml"
    runs = [
        label_free_run(recipe, [f"trainer.seed={seed}", f"trainer.max_steps={args.steps}", f"eval.size={args.eval_size}"])
        for seed in range(args.seeds)
    ]
    for seed, figures in enumerate(runs):
        print(f"seed {seed}: " + "  ".join(f"{k} {v:.3f}" for k, v in figures.items()), flush=True)
    for key in runs[0]:
        print(f"{args.plugin} {key}: {sum(r[key] for r in runs) / len(runs):.3f}")


if __name__ == "__main__":
    main()
