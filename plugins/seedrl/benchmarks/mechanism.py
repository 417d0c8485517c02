"""SEED's mechanism on the built-in task: a skill's log-probability shift, added to GRPO's advantage, teaches the
bare question the verified approach.

Raw-trajectory analogue (the built-in model cannot analyse a trajectory): a row's skill is a verified completion
of the same problem stored at an earlier step, shown before the question. `signal(seed)` measures one real step on
the untrained model: held-out problems sampled by the policy, each group's first verified completion stored as the
problem's skill, then the shift ``log pi(y_t | skill, question) - log pi(y_t | question)`` of the sampled tokens on
the correct and the wrong rows. `run(seed, steps)` trains configs/recipes/seedrl-cpu.yaml (a pool of 32 problems
that recur every 4 steps, the outcome reward weighted 1 beside the skill term) and measures, before and after, the
policy's mean per-token log-probability of each pool problem's correct solution after the bare question and its
greedy accuracy; with `--methods grpo`, plain GRPO on the same pool at equal steps.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/seedrl/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/seedrl/benchmarks/mechanism.py --signal --seeds 0 1 2
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread, trained_solution_figures
from stackrl.testing.heldout import advantage_context, heldout_rollout, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "seedrl-cpu.yaml"


def signal(seed: int, problems: int = 16, overrides=()) -> dict[str, float]:
    """One real step of the rule on the untrained model: the mean shift per token on correct and on wrong rows of
    held-out problems whose library holds a verified completion, and the share of rows re-scored."""
    from stackrl_seedrl.skills import keep_verified

    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=1, output_dir=out, overrides=overrides)
        trainer = build_trainer(config)
        plugin = trainer.plugins.plugins["seedrl"]
        rollout = heldout_rollout(trainer, problems, seed)
        correct = rollout.rewards["exact_match"].bool()
        keep_verified(plugin.library, rollout, correct.tolist(), 0)
        advantages = rollout.advantages.clone()
        reshaped = plugin.reshape_advantages(advantages, advantage_context(trainer, rollout, "seedrl"))
        mask = rollout.completion_mask()
        shift = (reshaped - advantages.unsqueeze(1) * mask) / plugin.config.weight
        skilled = torch.tensor([s is not None for s in rollout.columns["skill"]])
        mean = lambda rows: float((shift[rows] * mask[rows]).sum() / mask[rows].sum().clamp_min(1))  # noqa: E731
        return {"shift_correct": mean(skilled & correct), "shift_wrong": mean(skilled & ~correct),
                "rescored": float(skilled.float().mean())}


def run(seed: int, steps: int, method: str = "seedrl", overrides=()) -> tuple[dict, dict, object, object]:
    """``(before, after, plugin, trainer)``: the figures before and after ``steps`` steps of the recipe (``method``
    "grpo": without its plugin)."""
    if method != "seedrl":
        overrides = [o for o in overrides if not o.startswith("seedrl.")]
    before, after, trainer, _ = trained_solution_figures(RECIPE, plugins=method == "seedrl", seed=seed, steps=steps,
                                                         overrides=overrides)
    return before, after, trainer.plugins.plugins.get("seedrl"), trainer


def main():
    from stackrl.testing.benchmark import arguments, changes, compare, signal_flag

    if signal_flag(__doc__.splitlines()[0], signal):
        return
    args = arguments(__doc__.splitlines()[0], steps=24, methods=("seedrl", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: changes(*run(seed, args.steps, method, args.overrides)[:2]),
            figures=("solution_logp_before", "solution_logp", "accuracy_before", "accuracy"), number_format=".4f")


if __name__ == "__main__":
    main()
