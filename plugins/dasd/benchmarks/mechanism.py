"""DASD on the built-in task: what its routing does to the student's entropy where it is least sure, and to the
held-out accuracy, against plain GRPO.

Held-out completions (the task's test split) are sampled once from the initial policy; the fifth of their tokens
with the highest student entropy are the "forks". Before and after a short run of configs/recipes/dasd-cpu.yaml
(GRPO plus DASD's routed correction to the token advantages), of the same recipe with the correction weighted 0
(plain GRPO, "grpo"), of the loss form with the reward weighted 0 ("loss": a routed JSD loss term alone, the
form that destroys the accuracy) and of that with nothing pushed ("opsd": quantile 1, OPSD's JSD on every
token), we measure on those same completions the student's mean entropy at the forks,
the mean JSD to the teacher at the other tokens, and the greedy held-out accuracy. Several seeds; one line per
seed and arm, then the means.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/dasd/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.blocks.teacher import generalized_jsd, student_and_teacher
from stackrl.blocks.tokensignals import entropy_and_topk_mass
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.heldout import greedy_accuracy, heldout_rollout

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "dasd-cpu.yaml"
LOSS_FORM = ["dasd.form=loss", "rewards.exact_match=0.0"]
ARMS = {"dasd": [], "grpo": ["dasd.scale=0.0"], "loss": LOSS_FORM, "opsd": [*LOSS_FORM, "dasd.threshold=1.0"]}
FORKS = 0.8  # the quantile of the initial student entropies above which a token is a fork


def measure(trainer, rollout, seed: int, forks=None) -> dict:
    """Student entropy and student-teacher JSD at every token of ``rollout`` (held-out problems of ``seed``); greedy
    accuracy on those problems; the forks (chosen here if not given)."""
    plugin = trainer.plugins.plugins["dasd"]
    policy = trainer._shared_policy
    with torch.no_grad():
        student, teacher = student_and_teacher(
            policy, rollout, plugin.config.teacher_template, teacher="policy", temperature=None, grad=False
        )
        entropy, _ = entropy_and_topk_mass(student, 1)
        jsd = generalized_jsd(student, teacher, 0.5)
    if forks is None:
        forks = entropy > torch.quantile(entropy.double(), FORKS).item()
    return {
        "fork_entropy": entropy[forks].mean().item(),
        "other_jsd": jsd[~forks].mean().item(),
        "accuracy": greedy_accuracy(trainer, len(rollout), seed=seed),
        "forks": forks,
    }


def run(arm: str, seed: int, steps: int, heldout: int, overrides=()) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as out:
        config = load_config([RECIPE], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={out}",
                                        "trainer.disable_tqdm=true", *overrides, *ARMS[arm]])
        trainer = build_trainer(config)
        rollout = heldout_rollout(trainer, heldout, seed=1000 + seed, group_size=1)
        before = measure(trainer, rollout, 1000 + seed)
        trainer.train()
        after = measure(trainer, rollout, 1000 + seed, before["forks"])
    return before, after


def main():
    from stackrl.testing.benchmark import arguments, changes, compare

    args = arguments(__doc__.splitlines()[0], steps=30, eval_size=128, methods=list(ARMS)).parse_args()
    compare(args, args.methods,
            lambda arm, seed, folder: changes(*run(arm, seed, args.steps, args.eval_size, args.overrides)),
            figures=[f"{key}{when}" for key in ("fork_entropy", "other_jsd", "accuracy") for when in ("_before", "")],
            number_format=".4f")


if __name__ == "__main__":
    main()
