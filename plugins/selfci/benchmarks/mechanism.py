"""SELFCI's mechanism on the built-in task: distillation moves the policy toward the product of its two teachers.

A short run of configs/recipes/selfci-cpu.yaml (pure distillation; both teachers the initial weights, one shown the
worked solution, one told not to state the first step's result), and of plain GRPO with the same settings (the
exact-match reward weighted 1) at equal steps. Completions of held-out problems are sampled once from the initial
policy; before and after each run we measure on them the mean per-token KL from the policy to the product of
experts of the two initial-weight teachers (``kl_poe``, what SELFCI minimises up to a constant), to each teacher
(``kl_utility``, ``kl_privacy``), and greedy held-out accuracy. Three seeds by default.

    nice -n 10 .venv/bin/python plugins/selfci/benchmarks/mechanism.py --seeds 0 1 2 --steps 20 --eval-size 64
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
import yaml

from stackrl.blocks.teacher import reverse_kl
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import greedy_accuracy, heldout_rollout, recipe_config
from stackrl_selfci import product_of_experts
from stackrl_selfci.plugin import teachers_and_student

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "selfci-cpu.yaml"
TEACHERS = "selfci-benchmark-teachers"  # a snapshot of the initial weights, taken in both runs


def divergences(trainer, config, rollout) -> dict[str, float]:
    """Mean per-token KL(policy || product of experts), KL(policy || each teacher), at the run's temperature."""
    with torch.no_grad():
        student, utility, privacy = teachers_and_student(trainer._shared_policy, rollout, config, teacher=TEACHERS,
                                                         grad=False)
    share = config.utility_weight / (config.utility_weight + config.privacy_weight)
    return {"kl_poe": reverse_kl(student, product_of_experts(utility, privacy, share)).mean().item(),
            "kl_utility": reverse_kl(student, utility).mean().item(),
            "kl_privacy": reverse_kl(student, privacy).mean().item()}


def teacher_settings(overrides=()) -> dict:
    """The recipe's ``selfci:`` section with the ``selfci.key=value`` overrides applied: the teachers both runs
    are measured against."""
    section = dict(yaml.safe_load(RECIPE.read_text())["selfci"])
    for item in overrides:
        key, _, value = item.partition("=")
        if key.startswith("selfci."):
            section[key.removeprefix("selfci.")] = yaml.safe_load(value)
    return section


def run(method: str = "selfci", seed: int = 0, steps: int = 20, heldout: int = 64, overrides=()) -> dict[str, float]:
    """Train ``method`` ("selfci": the CPU recipe; "grpo": the same without the plugin, exact match weighted 1) for
    ``steps`` steps; the divergences and accuracy before (``*_before``) and after."""
    from stackrl_selfci import SelfciConfig

    with one_thread(), tempfile.TemporaryDirectory() as out:
        extra = [] if method == "selfci" else ["rewards.exact_match=1.0"]
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out, overrides=list(overrides))
        section = SelfciConfig(**teacher_settings(overrides))
        if method != "selfci":
            config = recipe_config(RECIPE, plugins=False, seed=seed, steps=steps, output_dir=out,
                                   overrides=[*overrides, *extra])
        trainer = build_trainer(config)
        rollout = heldout_rollout(trainer, heldout // 2, seed=1000 + seed, group_size=2)
        trainer._shared_policy.update_snapshot(TEACHERS)
        before = {f"{k}_before": v for k, v in divergences(trainer, section, rollout).items()}
        before["accuracy_before"] = greedy_accuracy(trainer, heldout, seed=2000 + seed)
        if steps:
            trainer.train()
        after = divergences(trainer, section, rollout)
        after["accuracy"] = greedy_accuracy(trainer, heldout, seed=2000 + seed)
    return {**after, **before}


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=20, eval_size=64, methods=("selfci", "grpo"))
    args = parser.parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(method, seed, args.steps, args.eval_size,
                                                                  args.overrides),
            figures=("kl_poe_before", "kl_poe", "kl_utility", "kl_privacy", "accuracy_before", "accuracy"),
            number_format=".4f")


if __name__ == "__main__":
    main()
