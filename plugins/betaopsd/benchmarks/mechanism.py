"""beta-OPSD's mechanism on the built-in task: the larger beta, the nearer the trained policy stays to the initial one.

For each beta, a short run of configs/recipes/betaopsd-cpu.yaml (pure distillation, live teacher, the reference
the initial weights). Completions of held-out problems are sampled once from the initial policy; after the run we
measure on them the mean per-token KL(trained || initial) given the bare question (the anchor beta weighs), the
mean per-token KL(trained || teacher), the teacher being the trained policy shown the worked solution (what
plain OPSD, beta 1, minimises), and the greedy held-out accuracy; the last two before the run too. Several seeds;
one line per beta and seed, then the means per beta.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/betaopsd/benchmarks/mechanism.py --seeds 0 1 2 --steps 20 \
        --eval-size 64 --betas 1 2 4
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.blocks.teacher import reverse_kl, score_student, student_and_teacher
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.heldout import greedy_accuracy, heldout_rollout

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "betaopsd-cpu.yaml"


def divergences(trainer, plugin, rollout) -> dict[str, float]:
    """Mean per-token KL(policy || initial) and KL(policy || teacher) on ``rollout``, at temperature 1."""
    policy = trainer._shared_policy
    everywhere = [range(len(ids)) for ids in rollout.completion_ids]
    with torch.no_grad():
        student, teacher = student_and_teacher(policy, rollout, plugin.config.teacher_template, teacher="policy",
                                               temperature=1.0, grad=False)
        initial = score_student(policy, everywhere, rollout=rollout, grad=False, model=plugin.name,
                                full_vocab=True, temperature=1.0).vocab_logprobs
    return {"kl_initial": reverse_kl(student, initial).mean().item(),
            "kl_teacher": reverse_kl(student, teacher).mean().item()}


def run(beta: float, seed: int, steps: int, heldout: int, overrides=()) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        config = load_config([RECIPE], [f"betaopsd.beta={beta}", f"trainer.seed={seed}", f"trainer.max_steps={steps}",
                                        f"output_dir={out}", *overrides])
        trainer = build_trainer(config)
        plugin = trainer.plugins.plugins["betaopsd"]
        rollout = heldout_rollout(trainer, heldout // 2, seed=1000 + seed, group_size=2)
        trainer._shared_policy.update_snapshot(plugin.name)  # train_begin takes the same copy again
        teacher_before = divergences(trainer, plugin, rollout)["kl_teacher"]
        accuracy_before = greedy_accuracy(trainer, heldout, seed=2000 + seed)
        trainer.train()
        after = divergences(trainer, plugin, rollout)
        after["accuracy"] = greedy_accuracy(trainer, heldout, seed=2000 + seed)
    return {**after, "kl_teacher_before": teacher_before, "accuracy_before": accuracy_before}


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=20, eval_size=64)
    parser.add_argument("--betas", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    args = parser.parse_args()
    betas = {f"beta {beta:g}": beta for beta in args.betas}
    compare(args, list(betas), lambda name, seed, folder: run(betas[name], seed, args.steps, args.eval_size,
                                                              args.overrides),
            figures=("kl_initial", "kl_teacher_before", "kl_teacher", "accuracy_before", "accuracy"),
            number_format=".4f")


if __name__ == "__main__":
    main()
