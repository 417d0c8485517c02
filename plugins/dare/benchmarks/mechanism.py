"""DARE's mechanism on the built-in task, label-free, against majority vote.

1. Groups sampled from the built-in model (no training): how often the right answer is present but not the
   majority, and how well each reward separates right from wrong completions (AUROC against the hidden answers).
2. Label-free training with configs/recipes/dare-cpu.yaml, and the same with majority vote (serl-cpu.yaml with
   its difficulty filter off): held-out pass@1 before and after, and the reward-truth AUROC and pseudo-label
   accuracy the host logged over training. Several seeds; one line per run, then the means.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/dare/benchmarks/mechanism.py --seeds 0 1 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.answers import answer_after_phrase, groups_of
from stackrl.config import load_config
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.measure import label_free_run
from stackrl.truth import auroc
from stackrl_dare.plugin import distribution_rewards

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"
BASELINE = ["serl.difficulty_filter=false"]  # plain majority vote


def sample_groups(questions: int, group_size: int, seed: int) -> tuple[list[str], list[bool]]:
    """``group_size`` completions of the built-in model to each of ``questions`` training questions of the DARE
    recipe's categories, sampled at temperature 1, and whether each is right."""
    config = load_config([RECIPES / "dare-cpu.yaml"], [f"output_dir={tempfile.mkdtemp()}"])
    trainer = build_trainer(config)
    rows = make_dataset(split="train", size=questions, seed=seed, **config.host.data.options)
    prompts = [q for q in rows["question"] for _ in range(group_size)]
    torch.manual_seed(seed)
    generations = trainer._shared_policy.generate(prompts, temperature=1.0)
    answers = [a for a in rows["answer"] for _ in range(group_size)]
    texts = [g.text for g in generations]
    return texts, [exact_match(text, answer) == 1.0 for text, answer in zip(texts, answers)]


def agreement(completions: list[str], correct: list[bool], group_size: int) -> dict[str, float]:
    """Majority vote and DARE's default reward on sampled groups, against the truth."""
    groups = groups_of([answer_after_phrase(t) for t in completions], group_size, math_verify=False)
    majority = torch.tensor([float(x) for g in groups for x in g.in_majority()])
    dare = torch.tensor([r for g in groups for r in distribution_rewards(g, 0.2, 0.1)])
    right = torch.tensor(correct).view(-1, group_size)
    vote_right = (majority.view(-1, group_size) * right).sum(1) > 0
    return {
        "groups_with_a_right_answer": right.any(1).double().mean().item(),
        "majority_right": vote_right.double().mean().item(),
        "right_answer_in_minority": (right.any(1) & ~vote_right).double().mean().item(),
        "auroc_majority": auroc(majority, right.flatten()),
        "auroc_dare": auroc(dare, right.flatten()),
    }


def run(recipe: str, seed: int, steps: int, eval_size: int, overrides=()) -> dict[str, float]:
    """One label-free training run of ``recipe``: held-out pass@1 before and after, and the means of what the host
    logged against the hidden answers."""
    settings = [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"eval.size={eval_size}", *overrides]
    return label_free_run(RECIPES / recipe, settings)


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=30, eval_size=200, seeds=(0, 1))
    parser.add_argument("--questions", type=int, default=200, help="training questions sampled for the agreement")
    args = parser.parse_args()
    torch.set_num_threads(1)
    completions, correct = sample_groups(args.questions, 8, seed=0)
    for key, value in agreement(completions, correct, 8).items():
        print(f"sampled {key}: {value:.3f}", flush=True)
    recipes = {"dare": ("dare-cpu.yaml", []), "majority": ("serl-cpu.yaml", BASELINE)}
    compare(args, list(recipes), lambda name, seed, folder: run(recipes[name][0], seed, args.steps, args.eval_size,
                                                                [*recipes[name][1], *args.overrides]))


if __name__ == "__main__":
    main()
