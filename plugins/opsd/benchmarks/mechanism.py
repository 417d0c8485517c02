"""OPSD's mechanism on the built-in task: distillation lowers the student-teacher divergence, accuracy holds.

On held-out problems (the task's test split), completions are sampled once from the initial policy; before and
after a short OPSD run (configs/recipes/opsd-cpu.yaml) we measure, on those same completions, the mean
per-token generalized JSD between the policy given the bare question (student) and given the worked solution
too (teacher), and the greedy accuracy on the held-out questions. Several seeds; prints one line per seed and
the means.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/opsd/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl import Rollout
from stackrl.config import load_config
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import make_dataset
from stackrl_opsd import distillation_divergence

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "opsd-cpu.yaml"


def heldout_rollout(policy, size: int, seed: int) -> Rollout:
    """Held-out questions with one completion each, sampled at temperature 1 by the policy as it is now."""
    rows = make_dataset(split="test", size=size, seed=seed)
    torch.manual_seed(seed)
    generations = policy.generate(list(rows["question"]), do_sample=True, temperature=1.0)
    return Rollout(
        prompts=list(rows["question"]),
        completions=[g.text for g in generations],
        prompt_ids=[g.prompt_ids for g in generations],
        completion_ids=[g.completion_ids for g in generations],
        columns={k: list(rows[k]) for k in ("answer", "solution")},
        group_size=1,
    )


def measure(trainer, plugin, rollout: Rollout) -> dict[str, float]:
    policy = trainer._shared_policy
    with torch.no_grad():
        divergence = distillation_divergence(policy, rollout, plugin.config, teacher=plugin.teacher_model, grad=False)
    greedy = policy.generate(rollout.prompts, do_sample=False)
    accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, rollout.columns["answer"])) / len(rollout)
    return {"divergence": divergence.mean().item(), "accuracy": accuracy}


def run(seed: int, steps: int, heldout: int, overrides=()) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as out:
        config = load_config(
            [RECIPE], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={out}", *overrides]
        )
        trainer = build_trainer(config)
        plugin = trainer.plugins.plugins["opsd"]
        rollout = heldout_rollout(trainer._shared_policy, heldout, seed=1000 + seed)
        if plugin.config.teacher == "ema":  # train_begin takes the EMA's first copy; measuring comes before
            trainer._shared_policy.update_snapshot(plugin.teacher_model)
        before = measure(trainer, plugin, rollout)
        trainer.train()
        after = measure(trainer, plugin, rollout)
    return before, after


def main():
    from stackrl.testing.benchmark import arguments, changes, compare

    args = arguments(__doc__.splitlines()[0], steps=30, eval_size=128).parse_args()
    compare(args, ("opsd",), lambda method, seed, folder: changes(*run(seed, args.steps, args.eval_size,
                                                                       args.overrides)),
            figures=("divergence_before", "divergence", "accuracy_before", "accuracy"), number_format=".4f")


if __name__ == "__main__":
    main()
